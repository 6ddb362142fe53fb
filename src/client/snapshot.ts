import { types } from 'node:util';
import { MAX_JSON_DEPTH } from '../shared/json.js';

/** A value the client refuses to send: JSON would lose it or change it. `path` names where. */
export class NotJson extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

/** Deeper than this (counting the input object itself) is refused before any other check. */
const MAX_SNAPSHOT_DEPTH = MAX_JSON_DEPTH + 8;
/**
 * Every JSON value costs at least one byte of text, and a valid input is at most a few bytes
 * over the 16 KiB payload limit: more values than this cannot be valid. Bounds the work on a
 * huge input (or one that repeats references to grow exponentially).
 */
const MAX_VALUES = 20_000;

function describe(value: object): string {
  if (value instanceof Date) return 'a Date';
  if (value instanceof Map) return 'a Map';
  if (value instanceof Set) return 'a Set';
  if (value instanceof RegExp) return 'a RegExp';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return 'binary data';
  if (value instanceof Promise) return 'a Promise';
  const ctor = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof ctor === 'string' && ctor !== '' ? `an instance of ${ctor}` : 'an object with a non-plain prototype';
}

function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/**
 * Copies a value that must be plain JSON, synchronously, into fresh plain objects and arrays,
 * so later changes by the caller cannot affect a call in flight. Refuses (NotJson) anything
 * JSON.stringify would drop, change or fail on: undefined, NaN and infinities, bigint,
 * functions, symbols (as values or keys), Dates, Maps, Sets and other class instances, boxed
 * primitives, proxies, sparse arrays or arrays with extra properties, accessors (never
 * invoked), non-enumerable properties, toJSON methods, and cycles. Repeated references to a
 * value outside its own ancestors are fine (JSON writes them twice). Strings must be
 * well-formed UTF-16 (no lone surrogates), as the service requires. -0 becomes 0, as JSON
 * writes it.
 */
export function snapshotJson(root: unknown, rootPath: string): unknown {
  const ancestors = new Set<object>();
  let values = 0;

  const copy = (value: unknown, path: string, depth: number): unknown => {
    values += 1;
    if (values > MAX_VALUES) throw new NotJson(rootPath, 'too large');
    switch (typeof value) {
      case 'string':
        if (!value.isWellFormed()) throw new NotJson(path, 'a string with a lone surrogate is not valid UTF-8');
        return value;
      case 'number':
        if (Number.isNaN(value)) throw new NotJson(path, 'NaN is not JSON');
        if (!Number.isFinite(value)) throw new NotJson(path, 'Infinity is not JSON');
        return value === 0 ? 0 : value;
      case 'boolean':
        return value;
      case 'undefined':
        throw new NotJson(path, 'undefined is not JSON (omit an optional member instead)');
      case 'bigint':
        throw new NotJson(path, 'a bigint is not JSON');
      case 'symbol':
        throw new NotJson(path, 'a symbol is not JSON');
      case 'function':
        throw new NotJson(path, 'a function is not JSON');
    }
    if (value === null) return null;
    const object = value as object;
    if (types.isProxy(object)) throw new NotJson(path, 'a Proxy is not plain JSON');
    if (depth > MAX_SNAPSHOT_DEPTH) throw new NotJson(rootPath, `nested deeper than ${MAX_JSON_DEPTH} levels`);
    if (ancestors.has(object)) throw new NotJson(path, 'a cycle (the value contains itself) is not JSON');
    const isArray = Array.isArray(object);
    const proto = Object.getPrototypeOf(object) as unknown;
    if (isArray ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) {
      throw new NotJson(path, `${describe(object)} is not plain JSON`);
    }
    const ownKeys = Reflect.ownKeys(object);
    if (ownKeys.some((key) => typeof key === 'symbol')) throw new NotJson(path, 'symbol-keyed properties are lost in JSON');
    // An own toJSON is refused below as a function; this catches one inherited from a patched prototype.
    if ('toJSON' in object && !Object.hasOwn(object, 'toJSON')) throw new NotJson(path, 'a toJSON method is not plain JSON');

    ancestors.add(object);
    try {
      if (isArray) {
        const array = object as unknown[];
        const length = array.length;
        if (length > MAX_VALUES) throw new NotJson(rootPath, 'too large');
        if (ownKeys.length !== length + 1) {
          const holes = ownKeys.length < length + 1;
          throw new NotJson(path, holes ? 'a sparse array (with holes) is not JSON' : 'an array with extra properties loses them in JSON');
        }
        const result: unknown[] = new Array<unknown>(length);
        for (let i = 0; i < length; i++) {
          const descriptor = Object.getOwnPropertyDescriptor(array, i);
          if (descriptor === undefined) throw new NotJson(childPath(path, i), 'a sparse array (with holes) is not JSON');
          if (!('value' in descriptor)) throw new NotJson(childPath(path, i), 'an accessor (getter/setter) is not plain JSON');
          result[i] = copy(descriptor.value, childPath(path, i), depth + 1);
        }
        return result;
      }
      const result: Record<string, unknown> = {};
      for (const key of ownKeys as string[]) {
        const descriptor = Object.getOwnPropertyDescriptor(object, key)!;
        const at = childPath(path, key);
        if (!('value' in descriptor)) throw new NotJson(at, 'an accessor (getter/setter) is not plain JSON');
        if (!descriptor.enumerable) throw new NotJson(at, 'a non-enumerable property is lost in JSON');
        if (key === 'toJSON' && typeof descriptor.value === 'function') throw new NotJson(path, 'a toJSON method is not plain JSON');
        // defineProperty, not assignment: a "__proto__" key stays an ordinary member.
        Object.defineProperty(result, key, { value: copy(descriptor.value, at, depth + 1), enumerable: true, writable: true, configurable: true });
      }
      return result;
    } finally {
      ancestors.delete(object);
    }
  };

  return copy(root, rootPath, 1);
}
