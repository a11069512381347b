// The port's fast verification, for mutation testing (docs/faults.md, "Mutation testing"):
//   node mutation/check.ts [--all]
// runs the port in-process on every forward and gradcheck case of ops/attention/*.json, on the
// training runs train.alignment and train.vit (not the 600-step reversal, 3 s: too slow to run
// once per mutant) and on the pretrained cases when MUTATION_MODEL_DIR names the model's
// directory, serialises each document as the command line writes it (golden.ts's dumps), and
// compares it with its committed golden (golden/attention/port, which equals the reference's
// fresh output) by the runner's rule: |port - golden| <= 1e-6 * (1 + |golden|), NaN matching
// nothing, infinities only themselves, shapes, dtypes, names, digests and the metadata (schema
// version, engine, generator, the echoed case) exactly. Exit 0 when every case agrees, 1 at the
// first that does not (or that throws): Stryker's command runner counts a mutant killed on a
// non-zero exit. --all keeps going and lists every disagreeing case. Under Stryker, a case whose
// path never reached the active mutant in the dry run is not run (coverage.ts).
//
// The checkout is found by walking up from the working directory (Stryker runs this from a
// sandbox copy of port_ts inside the checkout) to the directory that holds ops/attention.

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { runCase, type CaseSpec } from "../src/cases/cases.ts";
import { splitDocuments, type Assets } from "../src/cases/casesPretrained.ts";
import { dumps, type Json } from "../src/core/golden.ts";
import { productEngine } from "../src/kernels/product.ts";
import { activeMutant, cannotReach, countUnder, recordCoverage } from "./coverage.ts";

const TOL = 1e-6;
const SKIPPED_OPS = new Set(["train_reversal"]);
const KINDS = ["forward", "gradcheck", "training", "pretrained"]; // this order: the cheap cases first

// The pretrained cases run only when MUTATION_MODEL_DIR names the model's directory (the runner
// finds it with `python -c "from verify import assets; print(assets.model_dir())"`): every model
// name of the catalogue is read from there, as cli.ts reads the request's assets.
const MODEL_DIR = process.env.MUTATION_MODEL_DIR;

function assetsOf(specs: CaseSpec[]): Assets | undefined {
  if (MODEL_DIR === undefined) return undefined;
  const files = { file: (name: string) => new Uint8Array(readFileSync(join(MODEL_DIR, name))) };
  return Object.fromEntries(specs.filter((s) => s.kind === "pretrained").map((s) => [String(s.config?.model), files]));
}

type TensorDoc = { dtype: string; shape: number[]; data: (number | string)[] };
type Doc = { [key: string]: unknown };

function checkout(): string {
  let dir = resolve(process.cwd());
  while (!existsSync(join(dir, "ops", "attention")) || !existsSync(join(dir, "golden", "attention"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("mutation/check.ts: no checkout (ops/attention, golden/attention) above the working directory");
    dir = up;
  }
  return dir;
}

function value(x: number | string): number {
  if (typeof x === "number") return x;
  if (x === "NaN") return NaN;
  if (x === "Infinity") return Infinity;
  if (x === "-Infinity") return -Infinity;
  throw new Error(`not a number: ${JSON.stringify(x)}`);
}

/** null when close, else what differs. */
function compareTensor(name: string, got: TensorDoc, want: TensorDoc): string | null {
  if (got === undefined) return `${name}: not written`;
  if (got.dtype !== want.dtype || JSON.stringify(got.shape) !== JSON.stringify(want.shape) || got.data.length !== want.data.length) {
    return `${name}: dtype/shape ${got.dtype} [${got.shape}] instead of ${want.dtype} [${want.shape}]`;
  }
  for (let i = 0; i < want.data.length; i++) {
    const a = value(got.data[i]), e = value(want.data[i]);
    const ok = Number.isFinite(e) ? Math.abs(a - e) <= TOL * (1 + Math.abs(e)) : a === e; // NaN !== NaN
    if (!ok) return `${name}[${i}]: ${a} instead of ${e}`;
  }
  return null;
}

/** The metadata the runner requires equal to the golden's (verify/goldens.py's METADATA). */
const METADATA = ["schema_version", "engine", "generator", "case"];

function compareDoc(got: Doc, want: Doc): string | null {
  for (const key of METADATA) {
    if (JSON.stringify(got[key]) !== JSON.stringify(want[key])) return `its ${key} differs from the golden's`;
  }
  for (const part of ["inputs", "outputs"]) {
    const g = got[part] as Record<string, TensorDoc>, w = want[part] as Record<string, TensorDoc>;
    const extra = Object.keys(g).filter((k) => !(k in w));
    if (extra.length) return `${part}: unexpected ${extra.join(", ")}`;
    for (const name of Object.keys(w)) {
      const problem = compareTensor(`${part}.${name}`, g[name], w[name]);
      if (problem) return problem;
    }
  }
  const digests = (d: unknown) => JSON.stringify(Object.entries((d ?? {}) as Record<string, string>).sort());
  if (digests(got.digests) !== digests(want.digests)) return "digests differ";
  return null;
}

function main(): number {
  // Under Node 24 the products run in the Wasm kernel, as in a browser; were its module broken,
  // every case would pass on the JavaScript fallback alone (test/kernels/product.test.ts checks both kernels).
  if (!productEngine.simd) {
    process.stdout.write("FAIL the Wasm product kernel is missing (its module did not build or validate)\n");
    return 1;
  }
  const all = process.argv.includes("--all");
  const root = checkout();
  const casesDir = join(root, "ops", "attention"); // the op bundles: their cases are the catalogue
  const specs: CaseSpec[] = [];
  for (const file of readdirSync(casesDir).filter((f) => f.endsWith(".json")).sort()) {
    specs.push(...(JSON.parse(readFileSync(join(casesDir, file), "utf8")).cases as CaseSpec[]));
  }
  const assets = assetsOf(specs);
  const chosen = KINDS.flatMap((kind) => specs.filter((s) => s.kind === kind && !SKIPPED_OPS.has(s.op)
    && (kind !== "pretrained" || assets !== undefined)));
  let failed = 0, skipped = 0;
  for (const spec of chosen) {
    const check = `case:${spec.id}`;
    if (cannotReach(check)) { // the active mutant's code is not on this case's path (coverage.ts)
      skipped++;
      continue;
    }
    let problem: string | null;
    try {
      const want = JSON.parse(readFileSync(join(root, "golden", "attention", "port", `${spec.id}.json`), "utf8")) as Doc;
      countUnder(check);
      const doc = spec.kind === "pretrained" ? splitDocuments(runCase(spec, assets)).golden : runCase(spec); // the golden's view
      countUnder(undefined);
      problem = compareDoc(JSON.parse(dumps(doc as Json)) as Doc, want); // written as the CLI writes it
    } catch (err) {
      problem = `threw ${(err as Error).message}`;
    }
    if (problem) {
      failed++;
      process.stdout.write(`FAIL ${spec.id}: ${problem}\n`);
      if (!all) return 1;
    }
  }
  recordCoverage(chosen.map((spec) => `case:${spec.id}`));
  const ran = chosen.length - skipped;
  process.stdout.write(`${ran - failed} of ${ran} cases agree with golden/attention/port`
    + (skipped ? ` (${skipped} cannot reach mutant ${activeMutant})\n` : "\n"));
  return failed ? 1 : 0;
}

process.exitCode = main();
