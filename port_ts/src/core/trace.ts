// Sub-layer tracing, for attribution inside a failing case (twin: reference/core/trace.py).
//
// A traced unit is a named row of tensors: a sub-layer's forward ("<name>", its output "out"), its
// backward ("<name>.backward", every gradient it returns, under its field names), or a stage of a
// training step ("step<t>.forward" .. "step<t>.adam"). Code hands each unit's tensors to
// record(name, values) and goes on with what it returns. Off (the default: no tracer) that is the
// values themselves. On, the tracer keeps them; fed another engine's recorded tensors, it returns
// that engine's in their place, so that the next unit computes from the other engine's input to
// it and its own tensors differ from the other engine's by what the unit itself introduces. The
// generator's draws stay in the same order either way.
//
// sublayer(name, fn, ...args) and backward(name, fn, ...args) wrap a forward and a backward call.
// Names are flat, in data-flow order: scope(prefix) sets the prefix of the names that follow (a
// model's loop over blocks: "enc.blk0."), scope("") clears it. untraced(fn) runs fn with tracing
// off (a gradient check's many loss evaluations, a training step's model).
// docs/runner.md, "Attribution".

import type { Tensor } from "./ops.ts";

/** A unit's values: tensors, records of tensors (a gradient record: "<label>.<key>"), or null. */
export type Values = Record<string, Tensor | Record<string, Tensor> | null>;

const isTensor = (v: unknown): v is Tensor => typeof v === "object" && v !== null && (v as Tensor).data instanceof Float64Array;

/** Records every unit's tensors; fed: "<unit>.<label>" -> tensor handed on in place of them. */
export class Tracer {
  fed: Record<string, unknown> | null;
  prefix = "";
  rows = new Map<string, Map<string, Tensor>>(); // unit name -> label -> tensor, in the order the units ran

  constructor(fed: Record<string, unknown> | null = null) {
    this.fed = fed;
  }

  record(unit: string, values: Values): Values {
    const name = this.prefix + unit;
    if (this.rows.has(name)) throw new Error(`traced unit '${name}' ran twice in one traced case; each name must be unique`);
    const flat = new Map<string, Tensor>(); // copies: the code goes on and may update a tensor in place (Adam)
    const copy = (x: Tensor): Tensor => ({ shape: [...x.shape], data: x.data.slice() });
    for (const [label, value] of Object.entries(values)) {
      if (isTensor(value)) flat.set(label, copy(value));
      else if (value !== null) for (const [key, v] of Object.entries(value)) flat.set(`${label}.${key}`, copy(v));
    }
    this.rows.set(name, flat);
    const fed = this.fed;
    if (fed === null) return values;
    const take = (label: string): Tensor => {
      const key = `${name}.${label}`;
      if (!Object.hasOwn(fed, key)) {
        throw new Error(`the trace fed to this case lacks '${key}'; it holds ${Object.keys(fed).length} tensors: trace both engines at the same version`);
      }
      return fed[key] as Tensor;
    };
    const out: Values = {};
    for (const [label, value] of Object.entries(values)) {
      out[label] = value === null ? null : isTensor(value) ? take(label)
        : Object.fromEntries(Object.keys(value).map((key) => [key, take(`${label}.${key}`)]));
    }
    return out;
  }
}

let tracer: Tracer | null = null; // the Tracer of the case being traced, or null (the default)

/** values traced as unit `name` when a tracer is on: the same record, with the fed engine's
 *  tensors in place when fed. */
export function record<V extends Values>(name: string, values: V): V {
  return tracer === null ? values : tracer.record(name, values) as V;
}

/** fn(...args), its output (the `out` field when fn returns {out, cache}) traced as "<name>.out". */
export function sublayer<A extends unknown[], R>(name: string, fn: (...args: A) => R, ...args: A): R {
  const result = fn(...args);
  if (tracer === null) return result;
  const paired = typeof result === "object" && result !== null && "cache" in result;
  const out = tracer.record(name, { out: (paired ? (result as unknown as { out: Tensor }).out : result) as Tensor }).out as Tensor;
  return (paired ? { ...(result as object), out } : out) as R;
}

/** fn(...args), a backward returning a record of gradients, each field traced under its name as
 *  unit "<name>.backward". */
export function backward<A extends unknown[], R extends Values>(name: string, fn: (...args: A) => R, ...args: A): R {
  const result = fn(...args);
  return tracer === null ? result : { ...result, ...tracer.record(`${name}.backward`, result) };
}

/** fn() with tracing off, whatever it calls. */
export function untraced<R>(fn: () => R): R {
  const saved = tracer;
  tracer = null;
  try {
    return fn();
  } finally {
    tracer = saved;
  }
}

/** Prefix the names of the units that follow (when a tracer is on). */
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

/** The traced units as a document: {"units": [{"name", "tensors": [keys]}] in the order they ran,
 *  "tensors": {"<unit>.<label>": tensorDoc(tensor)}} (docs/protocol.md, "Traces"). */
export function document<D>(t: Tracer, tensorDoc: (x: Tensor) => D): { units: { name: string; tensors: string[] }[]; tensors: Record<string, D> } {
  const units: { name: string; tensors: string[] }[] = [];
  const tensors: Record<string, D> = {};
  for (const [name, row] of t.rows) {
    const keys = [...row.keys()].map((label) => `${name}.${label}`);
    units.push({ name, tensors: keys });
    for (const [label, x] of row) tensors[`${name}.${label}`] = tensorDoc(x);
  }
  return { units, tensors };
}
