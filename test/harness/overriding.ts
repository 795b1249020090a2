/**
 * `target` with one method replaced; every other property is the target's own, its methods bound
 * to it (a pg Pool's methods use private fields, which a proxy as `this` cannot reach). The fault
 * tests use it to put a fault exactly where they mean to: a pool whose connect() waits, whose first
 * query kills PostgreSQL.
 */
export function overriding<T extends object, K extends keyof T>(
  target: T,
  name: K,
  method: T[K],
): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      if (prop === name) return method;
      const v = Reflect.get(t, prop, receiver);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}
