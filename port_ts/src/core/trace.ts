// Sub-layer tracing, for attribution inside a failing case (twin: reference/core/trace.py).
//
// A composed model calls each of its sub-layers through sublayer(name, fn, ...args). Off (the
// default: no tracer) that is fn(...args) after one check. On, the tracer keeps each sub-layer's
// output as "<name>.out" (the `out` field when fn returns {out, cache}); fed another engine's
// recorded outputs, it also hands on that engine's output in place of its own, so that every
// sub-layer computes from the other engine's input to it (where the model routes its sub-layers
// as that engine does) and its own output differs from the other engine's by what the sub-layer
// itself introduces. The generator's draws stay in the same order either way.
//
// Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow (a
// model's loop over blocks: "enc.blk0."), scope("") clears it. docs/runner.md, "Attribution".

import type { Tensor } from "./ops.ts";

/** Records every sub-layer's output; fed: name -> tensor handed on in place of it. */
export class Tracer {
  fed: Record<string, unknown> | null;
  prefix = "";
  tensors: Record<string, Tensor> = {}; // "<name>.out" -> tensor, in the order the sub-layers ran

  constructor(fed: Record<string, unknown> | null = null) {
    this.fed = fed;
  }

  call(name: string, fn: (...args: unknown[]) => unknown, args: unknown[]): unknown {
    const key = `${this.prefix}${name}.out`;
    if (Object.hasOwn(this.tensors, key)) throw new Error(`sub-layer '${key.slice(0, -4)}' ran twice in one traced case; each name must be unique`);
    const result = fn(...args);
    const paired = typeof result === "object" && result !== null && "cache" in result;
    this.tensors[key] = (paired ? (result as unknown as { out: Tensor }).out : result) as Tensor;
    if (this.fed === null) return result;
    if (!Object.hasOwn(this.fed, key)) {
      throw new Error(`the trace fed to this case lacks '${key}'; it holds ${Object.keys(this.fed).length} tensors: trace both engines at the same version`);
    }
    return paired ? { ...(result as object), out: this.fed[key] } : this.fed[key];
  }
}

let tracer: Tracer | null = null; // the Tracer of the case being traced, or null (the default)

/** fn(...args), traced as sub-layer `name` when a tracer is on. */
export function sublayer<A extends unknown[], R>(name: string, fn: (...args: A) => R, ...args: A): R {
  if (tracer === null) return fn(...args);
  return tracer.call(name, fn as (...args: unknown[]) => unknown, args) as R;
}

/** Prefix the names of the sub-layers that follow (when a tracer is on). */
export function scope(prefix: string): void {
  if (tracer !== null) tracer.prefix = prefix;
}

/** Turn tracing on for one case; returns the Tracer. */
export function start(fed: Record<string, unknown> | null = null): Tracer {
  tracer = new Tracer(fed);
  return tracer;
}

/** Turn tracing off. */
export function stop(): void {
  tracer = null;
}
