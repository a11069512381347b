// The port's command line (Node only; the numerical core never imports this). The runner speaks
// to it as to the reference (docs/protocol.md):
//   node port_ts/src/cli.ts run            request on stdin, one golden file per case, status lines out
//   node port_ts/src/cli.ts rng-hash --seed S --count N --kind uniform|normal

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runCase, type CaseSpec } from "./cases.ts";
import { CaseError } from "./caseConfig.ts";
import { dumps } from "./golden.ts";
import { Generator } from "./rng.ts";

function run(): number {
  let request: { out_dir: string; cases: CaseSpec[] };
  try {
    request = JSON.parse(readFileSync(0, "utf8"));
    if (typeof request.out_dir !== "string" || !Array.isArray(request.cases)) throw new Error("missing fields");
  } catch (err) {
    process.stderr.write(`port: the request on stdin must be JSON with 'out_dir' and 'cases': ${(err as Error).message}\n`);
    return 2;
  }
  mkdirSync(request.out_dir, { recursive: true });
  for (const spec of request.cases) {
    const start = performance.now();
    const status: Record<string, unknown> = { id: spec.id };
    try {
      const doc = runCase(spec);
      writeFileSync(join(request.out_dir, `${spec.id}.json`), dumps(doc) + "\n");
      status.ok = true;
    } catch (err) {
      const e = err as Error;
      status.ok = false;
      status.error = err instanceof CaseError ? e.message : `${e.name}: ${e.message}`;
      if (!(err instanceof CaseError)) status.trace = String(e.stack ?? "").split("\n").slice(0, 5).join("\n");
    }
    status.seconds = (performance.now() - start) / 1000;
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
  if (command === "run") return run();
  if (command === "rng-hash") return rngHash(rest);
  process.stderr.write("usage: cli.ts run | rng-hash --seed S --count N --kind uniform|normal\n");
  return 2;
}

process.exitCode = main(process.argv.slice(2));
