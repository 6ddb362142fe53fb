import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { masters, type RedisClient } from './connection.js';

/** lua/ at the package root: two levels up from src/redis or dist/redis. */
export const LUA_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'lua');

const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"\s*$/gm;

/** Expands `--- @include "name"` lines with lua/includes/name.lua, each include once per script. */
export function expandIncludes(source: string, dir = LUA_DIR, seen = new Set<string>()): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (seen.has(name)) return `-- (${name} already included)`;
    seen.add(name);
    const body = readFileSync(join(dir, 'includes', `${name}.lua`), 'utf8');
    return expandIncludes(body, dir, seen);
  });
}

export interface LoadedScript {
  name: string;
  source: string;
  sha: string;
}

export function loadScript(name: string, dir = LUA_DIR): LoadedScript {
  const source = expandIncludes(readFileSync(join(dir, `${name}.lua`), 'utf8'), dir);
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * Runs scripts by SHA. A NOSCRIPT answer (Redis restarted, or SCRIPT FLUSH) is answered by
 * sending the source once, which also reloads it into the script cache.
 */
export class ScriptRunner<Name extends string> {
  private readonly scripts: Map<Name, LoadedScript>;
  private loaded = false;

  constructor(names: readonly Name[], dir = LUA_DIR) {
    this.scripts = new Map(names.map((name) => [name, loadScript(name, dir)]));
  }

  /** True once every script was loaded into every master at least once. */
  get isLoaded(): boolean {
    return this.loaded;
  }

  async preload(redis: RedisClient): Promise<void> {
    const nodes = masters(redis);
    // A cluster client that has not loaded its slot map yet lists no masters: loading into
    // none of them is not "loaded".
    if (nodes.length === 0) throw new Error('Redis Cluster is not ready: no master to load the scripts into');
    for (const node of nodes) {
      for (const script of this.scripts.values()) await node.script('LOAD', script.source);
    }
    this.loaded = true;
  }

  async run(redis: RedisClient, name: Name, keys: string[], args: Array<string | number>): Promise<unknown> {
    const script = this.scripts.get(name);
    if (!script) throw new Error(`unknown script ${name}`);
    try {
      return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return redis.eval(script.source, keys.length, ...keys, ...args);
      }
      throw error;
    }
  }
}
