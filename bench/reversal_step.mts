// One training step of the reverse-the-digits model in the port, timed inside Node
// (docs/performance.md; twin of bench/reversal_step.py: the same config, seed and batches).
// A step is the loss and gradients of batch t (stepFn), no Adam update, so repeats are the same work.
//   node bench/reversal_step.mts [steps] [warmup]  -> JSON {median_ms, min_ms, times_ms}
//   node bench/reversal_step.mts serve             -> reads one step number t per line, runs that
//                                                     step, answers the step's time in ms (a line)
//   node --cpu-prof bench/reversal_step.mts 300    -> a .cpuprofile for the profile
import { createInterface } from "node:readline";
import { Generator } from "../port_ts/src/rng.ts";
import { reversalSetup } from "../port_ts/src/reversal.ts";

const SEED = 601;
const CONFIG = {
  d: 16, heads: 2, ffn_hidden: 64, enc_blocks: 1, dec_blocks: 1, min_digits: 6, max_digits: 6,
  n_train: 640, n_test: 64, batch: 64, steps: 600, lr: 0.01, clip: 1.0, checkpoint_every: 50,
};

const run = reversalSetup(CONFIG, new Generator(SEED));

function step(t: number): number {
  const t0 = process.hrtime.bigint();
  run.stepFn(run.params, t);
  return Number(process.hrtime.bigint() - t0) / 1e6;
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
  const times: number[] = [];
  for (let i = 0; i < steps; i++) times.push(step((i % 10) + 1));
  const sorted = [...times].sort((x, y) => x - y);
  const h = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[h] : (sorted[h - 1] + sorted[h]) / 2;
  console.log(JSON.stringify({ median_ms: median, min_ms: sorted[0], times_ms: times }));
}
