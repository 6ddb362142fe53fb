import { register } from 'prom-client';

/**
 * A metric of prom-client's default registry, created once: the registry outlives a
 * re-evaluation of the module that declares the metric (tests load modules afresh per file in
 * one process), and a second registration of a name would throw.
 */
export function registeredOnce<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}
