// `npm run verify:attention` (from the repository root or port_ts/): runs `verify` with the
// arguments npm passes on (`npm run verify:attention -- --case 'vit.*'`), with its output and its
// exit code. The Python environment is the active one ($VIRTUAL_ENV) or the README's, .venv at
// the repository root; without one it says in one line how to make it, exit 2. A signal to this
// process is passed on to verify, which stops its engines and exits (nothing outlives it).

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MAKE = "python3 -m venv .venv && . .venv/bin/activate && pip install -e .";

const candidates = [process.env.VIRTUAL_ENV, join(ROOT, ".venv")].filter((d) => d !== undefined && d !== "");
const verify = candidates.map((d) => join(d, "bin", "verify")).find((p) => existsSync(p));
if (verify === undefined) {
  console.error(`verify: no Python environment with verify in ${candidates.join(" or ")}; make it with \`${MAKE}\` in ${ROOT} (README, the main command)`);
  process.exit(2);
}

const child = spawn(verify, process.argv.slice(2), { cwd: ROOT, stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("error", (err) => {
  console.error(`verify: cannot start ${verify}: ${err.message}; remake the environment with \`${MAKE}\``);
  process.exit(2);
});
child.on("exit", (code, signal) => process.exit(code ?? (signal === "SIGINT" ? 130 : signal === "SIGHUP" ? 129 : 143)));
