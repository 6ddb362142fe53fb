import type { TestProject } from 'vitest/node';
import { startCluster } from './cluster.js';

/**
 * Global setup of the `cluster` test project (vitest.config.ts): starts a local Redis Cluster
 * of three masters (test/setup/cluster.ts) and provides its node list as `redisClusterNodes`,
 * which the test helpers (test/setup/redis-url.ts) turn into REDIS_CLUSTER_NODES and cluster
 * clients. Nothing is put into process.env: the default project's workers keep the single Redis.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startCluster();
  console.log(`Cluster tests use a local Redis Cluster at ${cluster.nodes.join(',')} (pids ${cluster.pids.join(' ')})`);
  project.provide('redisClusterNodes', cluster.nodes.join(','));
  return () => cluster.stop();
}
