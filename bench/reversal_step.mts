// One training step of the reverse-the-digits model in the port, timed inside Node
// (docs/performance.md; twin of bench/reversal_step.py: the same config, seed and batches,
// read from the case train.reversal of the catalogue through bench/catalogue.py, with the Python
// of $PYTHON, default python3: the project's environment).
// A step is the loss and gradients of batch t (stepFn), no Adam update, so repeats are the same work.
//   node bench/reversal_step.mts [steps] [warmup]  -> JSON {median_ms, min_ms, median_cpu_ms, times_ms}
//   node bench/reversal_step.mts serve             -> reads one step number t per line, runs that
//                                                     step, answers the step's time in ms (a line)
//   node --cpu-prof bench/reversal_step.mts 300    -> a .cpuprofile for the profile
import { execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { Generator } from "../port_ts/src/core/rng.ts";
import { reversalSetup } from "../port_ts/src/runs/reversal.ts";

// The real case's seed and config, read from the catalogue so the benchmark cannot drift from it.
const CASE_ID = "train.reversal";
const PYTHON = process.env.PYTHON ?? "python3";
function catalogueCase(id: string): { seed: number; config: Record<string, unknown> } {
  try {
    return JSON.parse(execFileSync(PYTHON, [new URL("./catalogue.py", import.meta.url).pathname, id], { encoding: "utf8" }));
  } catch (e) {
    throw new Error(`expected \`${PYTHON} bench/catalogue.py ${id}\` to print the case, but it failed (${(e as Error).message.split("\n")[0]}); `
      + "activate the project's environment (pip install -e '.[test]'), or set PYTHON to its python");
  }
}
const { seed: SEED, config: CONFIG } = catalogueCase(CASE_ID);

const run = reversalSetup(CONFIG, new Generator(SEED));

const cpuTimes: number[] = []; // CPU ms of this process per step: less disturbed than wall time by other jobs

function step(t: number): number {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  run.stepFn(run.params, t);
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  const c = process.cpuUsage(c0);
  cpuTimes.push((c.user + c.system) / 1e3);
  return wall;
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((x, y) => x - y);
  const h = sorted.length >> 1;
  return sorted.length % 2 ? sorted[h] : (sorted[h - 1] + sorted[h]) / 2;
}

if (process.argv[2] === "serve") {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    process.stdout.write(`${step(Number(line))}\n`);
  }
} else {
  const steps = Number(process.argv[2] ?? 100), warmup = Number(process.argv[3] ?? 20);
  for (let t = 1; t <= warmup; t++) step((t % 10) + 1);
  cpuTimes.length = 0;
  const times: number[] = [];
  for (let i = 0; i < steps; i++) times.push(step((i % 10) + 1));
  console.log(JSON.stringify({ median_ms: median(times), min_ms: Math.min(...times), median_cpu_ms: median(cpuTimes), times_ms: times }));
}
