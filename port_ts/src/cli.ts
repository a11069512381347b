// The port's command line (Node only; the numerical core never imports this). The runner speaks
// to it as to the reference (docs/protocol.md):
//   node port_ts/src/cli.ts run [--kernel auto|js|wasm]
//                                          request on stdin, one golden file per case, status lines out
//                                          (a case the request's "inputs_from" names computes from that
//                                          document's inputs; a training case also writes out_dir/<id>.states/step_<t>.json,
//                                          and the request's "replay" field out_dir/<id>.replay/step_<t1>.json
//                                          and, for its "evaluate" steps, out_dir/<id>.replay/evaluate_<t>.json;
//                                          a pretrained case reads the request's "assets" {model: directory}
//                                          and writes out_dir/<id>.full.json beside its golden view;
//                                          the request's "trace" {id: "record" | {"fed": path}} writes out_dir/<id>.trace.json,
//                                          its sub-layers' tensors (core/trace.ts);
//                                          the request's "kernel", or --kernel, picks the product kernel,
//                                          and each status line counts the products each kernel ran)
//                                          a request of "kind" encode or export writes out_dir/<id>.json,
//                                          the document of that kind, per item: cases/requests.ts)
//   node port_ts/src/cli.ts rng-hash --seed S --count N --kind uniform|normal

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { caseStatus, runCaseWithStates, writeCase, type CaseSpec } from "./cases/cases.ts";
import type { Assets } from "./cases/casesPretrained.ts";
import { evaluateState, replaySegment } from "./cases/casesTraining.ts";
import { document, ITEMS, itemId, KINDS } from "./cases/requests.ts";
import { CaseError, handedInputs } from "./core/caseConfig.ts";
import { caseDocument, dumps, tensorDoc, type Json } from "./core/golden.ts";
import * as trace from "./core/trace.ts";
import { productEngine } from "./kernels/product.ts";
import type { StateDocument } from "./runs/train.ts";
import { Generator } from "./core/rng.ts";

interface ReplayEntry { from_dir: string; segments: [number, number][]; evaluate?: number[]; free_run?: boolean }

/** The state document of step t in fromDir (the reference's states), checked to hold step t. */
function readState(fromDir: string, t: number, what: string): StateDocument {
  const source = join(fromDir, `step_${t}.json`);
  let stateDoc: StateDocument;
  try {
    stateDoc = JSON.parse(readFileSync(source, "utf8"));
  } catch (err) {
    throw new CaseError(`${what}: cannot read the state of step ${t} from ${source}: ${(err as Error).message}`);
  }
  const opt = ((stateDoc.outputs as { [k: string]: { data: Json[] } } | undefined)?.opt?.data ?? [null])[0];
  if (opt !== t) throw new CaseError(`${what}: ${source} holds the state of step ${opt}, not ${t}`);
  return stateDoc;
}

/** docs/training.md, Replay: for each segment [t0, t1], the state of step t0 read from
 *  entry.from_dir, steps t0+1..t1 run here, the state at t1 written to out_dir/<id>.replay/; then
 *  for each step t of entry.evaluate, the state of step t evaluated (the run's evaluate()), written
 *  to out_dir/<id>.replay/evaluate_<t>.json. Returns [segments, evaluations]. */
function replay(spec: CaseSpec, entry: ReplayEntry, outDir: string): [number, number] {
  const segments = entry.segments, evaluate = entry.evaluate ?? [];
  if (typeof entry.from_dir !== "string" || !Array.isArray(segments)
      || !segments.every((s) => Array.isArray(s) && s.length === 2 && s.every(Number.isInteger))
      || !Array.isArray(evaluate) || !evaluate.every(Number.isInteger)) {
    throw new CaseError(`replay of '${spec.id}' needs 'from_dir', 'segments' [[t0, t1], ...] and optionally 'evaluate' [t, ...], got ${JSON.stringify(entry)}`);
  }
  const target = join(outDir, `${spec.id}.replay`);
  mkdirSync(target, { recursive: true });
  for (const [t0, t1] of segments) {
    const stateDoc = readState(entry.from_dir, t0, `replay [${t0}, ${t1}]`);
    writeFileSync(join(target, `step_${t1}.json`), dumps(replaySegment(spec, stateDoc, t1)) + "\n");
  }
  for (const t of evaluate) {
    const stateDoc = readState(entry.from_dir, t, `evaluate ${t}`);
    writeFileSync(join(target, `evaluate_${t}.json`), dumps(caseDocument(spec as unknown as Json, {}, evaluateState(spec, stateDoc))) + "\n");
  }
  return [segments.length, evaluate.length];
}

/** The document the request hands to case `id` (docs/protocol.md, "Handed inputs"), read from the
 *  path it names; undefined when it names none. */
function handed(inputs: Record<string, unknown>, id: string): unknown {
  if (!Object.hasOwn(inputs, id)) return undefined;
  const path = inputs[id];
  try {
    if (typeof path !== "string") throw new Error(`not a path: ${JSON.stringify(path)}`);
    const doc = JSON.parse(readFileSync(path, "utf8")) as { inputs?: unknown };
    if (doc?.inputs === undefined) throw new Error(`${path} has no 'inputs'`);
    return doc;
  } catch (err) {
    throw new CaseError(`cannot read the inputs handed to '${id}': ${(err as Error).message}`);
  }
}

/** Turn tracing on for case `id` as the request's "trace" asks: "record", or {"fed": the path of
 *  another engine's <id>.trace.json} (docs/protocol.md, "Traces"; twin: reference/__main__.py). */
function tracer(mode: unknown, id: string): trace.Tracer {
  if (mode === "record") return trace.start();
  const path = (mode as { fed?: unknown } | null)?.fed;
  if (typeof path !== "string") throw new CaseError(`'trace' of '${id}' must be "record" or {"fed": a path}, got ${JSON.stringify(mode)}`);
  let tensors: unknown;
  try {
    tensors = (JSON.parse(readFileSync(path, "utf8")) as { tensors?: unknown }).tensors;
  } catch (err) {
    throw new CaseError(`cannot read the trace fed to '${id}' from ${path}: ${(err as Error).message}`);
  }
  return trace.start(handedInputs(tensors, id));
}

/** The request's assets {model name: directory} as the core takes them: bytes of a file, read on demand. */
function modelFiles(dirs: Record<string, unknown>): Assets {
  const assets: Assets = {};
  for (const [name, dir] of Object.entries(dirs)) {
    if (typeof dir === "string") assets[name] = { file: (file: string) => new Uint8Array(readFileSync(join(dir, file))) };
  }
  return assets;
}

/** Stop when the runner that started this engine is gone, however it died (SIGKILL leaves it no
 *  way to stop its engines): a worker thread (the cases run on the main thread without yielding to
 *  its event loop) watches the parent pid and the runner named by VERIFY_RUN_OWNER
 *  ("<pid>-<start ticks>", twin: reference/__main__.py _alive), which also holds when the runner
 *  died before this engine got going or through a wrapper between them (docs/protocol.md). */
function exitWithParent(): void {
  const watcher = new Worker(`const { workerData } = require("node:worker_threads");
const { existsSync, readFileSync } = require("node:fs");
const [pid, ticks] = /^\\d+-\\d+$/.test(workerData.owner) ? workerData.owner.split("-").map(Number) : [0, 0];
const proc = existsSync("/proc/self/stat");
function ownerAlive() {
  if (pid === 0) return true;
  if (!proc) { try { process.kill(pid, 0); return true; } catch (e) { return e.code !== "ESRCH"; } }
  let fields;
  try { const s = readFileSync("/proc/" + pid + "/stat", "latin1"); fields = s.slice(s.lastIndexOf(")") + 2).split(" "); }
  catch { return false; }
  return fields[0] !== "Z" && (ticks === 0 || fields[19] === String(ticks));
}
function check() { if (process.ppid !== workerData.parent || !ownerAlive()) process.kill(process.pid, "SIGKILL"); }
check();
setInterval(check, 250);`, { eval: true, workerData: { parent: process.ppid, owner: process.env.VERIFY_RUN_OWNER ?? "" } });
  watcher.unref();
}

const KERNELS = ["auto", "js", "wasm"];

/** docs/protocol.md, Kernel: the request's "kernel" or --kernel (they must agree when both are
 *  given), "auto" when neither; an error message for anything else, or "wasm" without Wasm SIMD. */
function kernelOf(fromRequest: unknown, fromFlag: string | undefined): "auto" | "js" | "wasm" | { error: string } {
  for (const [where, value] of [["the request's 'kernel'", fromRequest], ["--kernel", fromFlag]] as const) {
    if (value !== undefined && !KERNELS.includes(value as string)) {
      return { error: `${where} must be one of ${KERNELS.join(", ")}, got ${JSON.stringify(value)}` };
    }
  }
  if (fromRequest !== undefined && fromFlag !== undefined && fromRequest !== fromFlag) {
    return { error: `the request's 'kernel' is ${JSON.stringify(fromRequest)} but --kernel is ${JSON.stringify(fromFlag)}; give one` };
  }
  const kernel = (fromRequest ?? fromFlag ?? "auto") as "auto" | "js" | "wasm";
  if (kernel === "wasm" && !productEngine.simd) {
    return { error: "kernel 'wasm' asked for, but this JavaScript engine has no WebAssembly SIMD; ask for 'auto' or 'js'" };
  }
  return kernel;
}

function run(args: string[]): number {
  exitWithParent();
  let flag: string | undefined;
  try {
    flag = parseArgs({ args, options: { kernel: { type: "string" } } }).values.kernel;
  } catch (err) {
    process.stderr.write(`usage: cli.ts run [--kernel ${KERNELS.join("|")}]: ${(err as Error).message}\n`);
    return 2;
  }
  let request: { out_dir: string; kind?: string; cases: CaseSpec[]; replay?: Record<string, ReplayEntry>; assets?: Record<string, unknown>; inputs_from?: Record<string, unknown>; trace?: Record<string, unknown>; kernel?: unknown };
  let kind: string;
  try {
    request = JSON.parse(readFileSync(0, "utf8"));
    kind = request.kind ?? "cases"; // docs/protocol.md, "Request kinds"
    if (!KINDS.includes(kind)) throw new Error(`'kind' must be one of ${KINDS.join(", ")}, got ${typeof kind === "string" ? `'${kind}'` : JSON.stringify(kind)}`);
    request.cases = (request as unknown as Record<string, CaseSpec[]>)[ITEMS[kind]];
    if (typeof request.out_dir !== "string" || !Array.isArray(request.cases)) throw new Error("missing fields");
    if (request.replay !== undefined && (typeof request.replay !== "object" || request.replay === null || Array.isArray(request.replay))) {
      throw new Error("'replay' must be an object {id: {from_dir, segments}}");
    }
    if (request.assets !== undefined && (typeof request.assets !== "object" || request.assets === null || Array.isArray(request.assets))) {
      throw new Error("'assets' must be an object {model name: directory}");
    }
    if (kind === "cases" && request.inputs_from !== undefined && (typeof request.inputs_from !== "object" || request.inputs_from === null || Array.isArray(request.inputs_from))) {
      throw new Error("'inputs_from' must be an object {id: the path of a document with the case's inputs}");
    }
    if (kind === "cases" && request.trace !== undefined && (typeof request.trace !== "object" || request.trace === null || Array.isArray(request.trace))) {
      throw new Error("'trace' must be an object {id: \"record\" | {\"fed\": a path}}");
    }
  } catch (err) {
    process.stderr.write(`port: the request on stdin must be JSON with 'out_dir' and 'cases' (or, of kind encode, 'inputs'): ${(err as Error).message}\n`);
    return 2;
  }
  const kernel = kernelOf(request.kernel, flag);
  if (typeof kernel !== "string") {
    process.stderr.write(`port: ${kernel.error}\n`);
    return 2;
  }
  productEngine.mode = kernel;
  mkdirSync(request.out_dir, { recursive: true });
  const replays = request.replay ?? {};
  const assets = modelFiles(request.assets ?? {});
  const write = (relative: string, text: string) => {
    const path = join(request.out_dir, relative);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  };
  for (const spec of request.cases) {
    const status = caseStatus(spec.id, () => performance.now(), (status) => {
      const entry = Object.hasOwn(replays, spec.id) ? replays[spec.id] : undefined;
      if (kind !== "cases") { // one document per item, nothing else
        const doc = document(kind, spec as unknown as { [key: string]: Json }, assets);
        write(`${itemId(spec)}.json`, dumps(doc) + "\n");
        return;
      }
      // a traced case traces its free run and its replay alike (docs/protocol.md, "Traces")
      const traced = request.trace !== undefined && Object.hasOwn(request.trace, spec.id) ? tracer(request.trace[spec.id], spec.id) : null;
      try {
        if (entry === undefined || entry.free_run !== false) {
          const result = runCaseWithStates(spec, assets, handed(request.inputs_from ?? {}, spec.id));
          writeCase(spec, result.doc, result.states, write);
        }
        if (entry !== undefined) [status.replayed, status.evaluated] = replay(spec, entry, request.out_dir);
      } finally {
        trace.stop();
      }
      if (traced !== null) write(`${spec.id}.trace.json`, dumps(trace.document(traced, tensorDoc)) + "\n");
    });
    process.stdout.write(JSON.stringify(status) + "\n");
  }
  return 0;
}

function rngHash(args: string[]): number {
  const { values } = parseArgs({ args, options: { seed: { type: "string" }, count: { type: "string" }, kind: { type: "string" } } });
  const seed = Number(values.seed), count = Number(values.count);
  if (!Number.isSafeInteger(seed) || !Number.isSafeInteger(count) || (values.kind !== "uniform" && values.kind !== "normal")) {
    process.stderr.write("usage: cli.ts rng-hash --seed S --count N --kind uniform|normal\n");
    return 2;
  }
  const g = new Generator(seed);
  const draws = values.kind === "uniform" ? g.uniform([count]) : g.normal([count]);
  const bytes = new Uint8Array(draws.data.length * 8);
  const view = new DataView(bytes.buffer);
  draws.data.forEach((v, i) => view.setFloat64(i * 8, v, true));
  process.stdout.write(createHash("sha256").update(bytes).digest("hex") + "\n");
  return 0;
}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  if (command === "run") return run(rest);
  if (command === "rng-hash") return rngHash(rest);
  process.stderr.write("usage: cli.ts run [--kernel auto|js|wasm] | rng-hash --seed S --count N --kind uniform|normal\n");
  return 2;
}

process.exitCode = main(process.argv.slice(2));
