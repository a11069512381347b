// Sub-layer tracing, for attribution inside a failing case (twin: reference/core/trace.py).
//
// A composed model calls each of its sub-layers through sublayer(name, fn, n, ...args), its data
// inputs the first n arguments (the rest, parameters and options, pass through). Off (the default:
// no tracer) that is fn(...args) after one check. On, the tracer keeps each sub-layer's data inputs
// as "<name>.in.<k>" (k < n: the argument's position) and its output
// ("<name>.out", the `out` field when fn returns {out, cache}); fed, it first replaces those inputs
// by another engine's recorded ones, so that every sub-layer's output differs from that engine's
// by what the sub-layer itself introduces. The generator's draws stay in the same order either way.
//
// Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow (a
// model's loop over blocks: "enc.blk0."), scope("") clears it. docs/runner.md, "Attribution".

import type { Tensor } from "./ops.ts";

/** Records every sub-layer's inputs and output; fed: name -> tensor replaces the inputs first. */
export class Tracer {
  fed: Record<string, unknown> | null;
  prefix = "";
  tensors: Record<string, Tensor> = {}; // in the order the sub-layers ran

  constructor(fed: Record<string, unknown> | null = null) {
    this.fed = fed;
  }

  call(name: string, fn: (...args: unknown[]) => unknown, n: number, args: unknown[]): unknown {
    name = this.prefix + name;
    if (Object.hasOwn(this.tensors, `${name}.out`)) throw new Error(`sub-layer '${name}' ran twice in one traced case; each name must be unique`);
    const given = [...args];
    for (let k = 0; k < n; k++) {
      const key = `${name}.in.${k}`;
      if (this.fed !== null) {
        if (!Object.hasOwn(this.fed, key)) {
          throw new Error(`the trace fed to this case lacks '${key}'; it holds ${Object.keys(this.fed).length} tensors: trace both engines at the same version`);
        }
        given[k] = this.fed[key];
      }
      this.tensors[key] = given[k] as Tensor;
    }
    const result = fn(...given);
    const out = typeof result === "object" && result !== null && "out" in result ? (result as { out: unknown }).out : result;
    this.tensors[`${name}.out`] = out as Tensor;
    return result;
  }
}

let tracer: Tracer | null = null; // the Tracer of the case being traced, or null (the default)

/** fn(...args), traced as sub-layer `name` of data inputs args[:n] when a tracer is on. */
export function sublayer<A extends unknown[], R>(name: string, fn: (...args: A) => R, n: number, ...args: A): R {
  if (tracer === null) return fn(...args);
  return tracer.call(name, fn as (...args: unknown[]) => unknown, n, args) as R;
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
