// The mutation score of the port, per file and in total, from Stryker's results
// (docs/faults.md, "Mutation testing"):
//   node mutation/score.ts [results.json] [--survivors out.json]
//                                   (default results: ../reports/stryker-incremental.json; --survivors
//                                   writes every surviving mutant: file, line, mutator, replacement,
//                                   a generated report: ../reports/stryker-survivors.json, git-ignored)
// Stryker's incremental file keeps every mutant's last result, so runs over different --mutate
// lists add up to one score. Score = detected / valid, as Stryker counts it: detected = killed or
// timed out, valid = detected + survived + no coverage (compile and runtime errors and ignored
// mutants are not valid mutants). Prints a Markdown table, files sorted by name, and lists the
// port's source files that have no result at all and those whose source changed since their
// results, so a partial or outdated run cannot pass for a whole one (exit 1 then, 0 otherwise).

import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

type Mutant = {
  status: string; mutatorName?: string; replacement?: string;
  location?: { start: { line: number; column: number } };
};
type Results = { files: Record<string, { mutants: Mutant[]; source: string }> };

const DETECTED = new Set(["Killed", "Timeout"]);
const UNDETECTED = new Set(["Survived", "NoCoverage"]);

const args = process.argv.slice(2);
const survivorsAt = args.indexOf("--survivors");
const survivorsFile = survivorsAt >= 0 ? args.splice(survivorsAt, 2)[1] : undefined;
const path = args[0] ?? join(import.meta.dirname, "..", "..", "reports", "stryker-incremental.json");
if (!existsSync(path)) {
  process.stderr.write(`mutation/score.ts: no results at ${path}; run Stryker first (docs/faults.md)\n`);
  process.exit(2);
}
const results = JSON.parse(readFileSync(path, "utf8")) as Results;

const pct = (d: number, v: number) => (v ? `${((100 * d) / v).toFixed(2)} %` : "n/a");
const rows: string[] = ["| file | score | killed | timeout | survived | no coverage | errors |", "|---|---|---|---|---|---|---|"];
const total = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, errors: 0 };
for (const file of Object.keys(results.files).sort()) {
  const c = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, errors: 0 };
  for (const m of results.files[file].mutants) {
    if (m.status === "Killed") c.killed++;
    else if (m.status === "Timeout") c.timeout++;
    else if (m.status === "Survived") c.survived++;
    else if (m.status === "NoCoverage") c.noCoverage++;
    else if (!DETECTED.has(m.status) && !UNDETECTED.has(m.status)) c.errors++;
  }
  for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += c[k];
  const detected = c.killed + c.timeout, valid = detected + c.survived + c.noCoverage;
  rows.push(`| ${file.replace(/^src\//, "")} | ${pct(detected, valid)} | ${c.killed} | ${c.timeout} | ${c.survived} | ${c.noCoverage} | ${c.errors} |`);
}
const detected = total.killed + total.timeout, valid = detected + total.survived + total.noCoverage;
const scored = Object.keys(results.files).length;
rows.push(`| **all ${scored} files** | **${pct(detected, valid)}** | **${total.killed}** | **${total.timeout}** | **${total.survived}** | **${total.noCoverage}** | **${total.errors}** |`);
process.stdout.write(rows.join("\n") + "\n");

const sources = (readdirSync(join(import.meta.dirname, "..", "src"), { recursive: true }) as string[])
  .map((f) => `src/${f.split("\\").join("/")}`).filter((f) => f.endsWith(".ts") && f !== "src/cli.ts").sort();
const missing = sources.filter((f) => !(f in results.files));
process.stdout.write(missing.length ? `\nnot yet mutated (${missing.length}): ${missing.join(", ")}\n` : `\nevery file of src/ but cli.ts is scored\n`);
// Results of a file whose source has changed since describe code that is no longer there.
const stale = Object.keys(results.files).filter((f) => sources.includes(f)
  && readFileSync(join(import.meta.dirname, "..", f), "utf8") !== results.files[f].source);
if (stale.length) process.stdout.write(`stale (the source changed since; run Stryker on them again): ${stale.join(", ")}\n`);
process.exitCode = missing.length || stale.length ? 1 : 0;

if (survivorsFile !== undefined) {
  const survivors = Object.keys(results.files).sort().flatMap((file) => results.files[file].mutants
    .filter((m) => UNDETECTED.has(m.status))
    .map((m) => ({ file, line: m.location?.start.line, column: m.location?.start.column, mutator: m.mutatorName, replacement: m.replacement })))
    .sort((a, b) => a.file.localeCompare(b.file) || (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
  mkdirSync(dirname(survivorsFile), { recursive: true });
  writeFileSync(survivorsFile, JSON.stringify(survivors, null, 1) + "\n");
  process.stdout.write(`${survivors.length} surviving mutants written to ${survivorsFile}\n`);
}
