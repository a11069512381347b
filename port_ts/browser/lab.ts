// The lab page's two commands (Node; docs/browsers.md, "The lab page"):
//   node port_ts/browser/lab.ts serve [--exports DIR]
//       serves the lab (port_ts/browser/page/lab.html) on 127.0.0.1 and prints its address; open it
//       in any browser; Ctrl-C stops it. DIR (default exports/attention) holds the baked runs that
//       `verify export attention` writes.
//   node port_ts/browser/lab.ts check --browser chromium|firefox|webkit [--exports DIR]
//                                     [--digits 380527 ...] [--positions 3,10 ...] [--screenshot FILE.png]
//       opens the lab in that browser as a reader would, types each input key by key, and prints one
//       JSON object: the browser and its version, and per input what the page shows, read from its
//       data attributes (the decoded tokens, the cross-attention weights, the cosine similarity).
//       tests/test_browsers.py compares them with the reference's.
// Exit 2, one line on stderr: a usage error, a browser that is not installed, a page that fails.

import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { BROWSERS, Fail, exitAfter, failureLine, type BrowserName, cleanup, openBrowser, type OpenBrowser } from "./browsers.ts";
import { serve } from "./server.ts";

const USAGE = "usage: lab.ts serve [--exports DIR] | lab.ts check --browser " +
  `${BROWSERS.join("|")} [--exports DIR] [--digits D ...] [--positions I,J ...] [--screenshot FILE]`;
const WAIT_MS = 60_000;


async function until<T>(browser: OpenBrowser, expression: string, ok: (v: T) => boolean, what: string): Promise<T> {
  const start = Date.now();
  for (;;) {
    const value = await browser.evaluate<T>(expression);
    if (ok(value)) return value;
    if (Date.now() - start > WAIT_MS) throw new Fail(`${browser.name}: ${what} (the page shows ${JSON.stringify(value)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function check(name: BrowserName, exportsDir: string, digits: string[], positions: string[], screenshot?: string): Promise<unknown> {
  const served = await serve({ dirs: { exports: exportsDir } });
  let browser: OpenBrowser | undefined;
  try {
    browser = await openBrowser(name);
    await browser.goto(`${served.base}port/browser/page/lab.html`);
    const state = await until<string>(browser, `document.getElementById("lab").dataset.state`, (s) => s !== "loading", "the lab did not load");
    if (state !== "ready") {
      throw new Fail(`${name}: the lab failed: ${await browser.evaluate<string>(`document.getElementById("lab-note").textContent`)}`);
    }
    const simd = await browser.evaluate<string>(`document.getElementById("lab-note").textContent`);
    const reversals = [];
    for (const d of digits) {
      await browser.type("#digits", d);
      const shown = await until<{ digits?: string; tokens?: string; weights?: string; text: string }>(browser,
        `(() => { const o = document.getElementById("reversed"); return { digits: o.dataset.digits, tokens: o.dataset.tokens, ` +
        `weights: document.getElementById("heads").dataset.weights, text: o.textContent }; })()`,
        (v) => v.digits === d, `typing ${d} did not update the decode`);
      reversals.push({ digits: d, shown: shown.text, tokens: JSON.parse(shown.tokens!), weights: JSON.parse(shown.weights!) });
    }
    const cosines = [];
    for (const pair of positions) {
      const [i, j] = pair.split(",");
      await browser.type("#pos-i", i);
      await browser.type("#pos-j", j);
      const shown = await until<{ positions?: string; cosine?: string; text: string }>(browser,
        `(() => { const o = document.getElementById("cosine"); return { positions: o.dataset.positions, cosine: o.dataset.cosine, text: o.textContent }; })()`,
        (v) => v.positions === `${Number(i)},${Number(j)}`, `typing positions ${pair} did not update the similarity`);
      cosines.push({ positions: [Number(i), Number(j)], shown: shown.text, cosine: shown.cosine });
    }
    if (screenshot !== undefined) await browser.screenshot(screenshot);
    return { browser: { name, version: browser.version }, note: simd, reversals, cosines, screenshot: screenshot ?? null };
  } finally {
    await browser?.close().catch(() => undefined);
    await served.close();
    cleanup();
  }
}

async function main(argv: string[]): Promise<number> {
  let values: { browser?: string; exports?: string; digits?: string[]; positions?: string[]; screenshot?: string };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv, allowPositionals: true, options: {
        browser: { type: "string" }, exports: { type: "string" }, digits: { type: "string", multiple: true },
        positions: { type: "string", multiple: true }, screenshot: { type: "string" },
      },
    }));
  } catch (err) {
    process.stderr.write(`${USAGE}: ${(err as Error).message}\n`);
    return 2;
  }
  const exportsDir = resolve(values.exports ?? "exports/attention");
  if (!existsSync(resolve(exportsDir, "train.reversal.json"))) {
    process.stderr.write(`lab: no baked run train.reversal.json in ${exportsDir}; write it with \`verify export attention --case train.reversal\`\n`);
    return 2;
  }
  if (positionals.length === 1 && positionals[0] === "serve") {
    const served = await serve({ dirs: { exports: exportsDir } });
    process.stdout.write(`the lab: ${served.base}port/browser/page/lab.html (Ctrl-C stops it)\n`);
    await new Promise<void>((done) => {
      for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => done());
    });
    await served.close();
    return 0;
  }
  const name = values.browser as BrowserName;
  if (positionals.length !== 1 || positionals[0] !== "check" || !BROWSERS.includes(name)
      || !(values.digits ?? []).every((d) => /^\d+$/.test(d)) || !(values.positions ?? []).every((p) => /^\d+,\d+$/.test(p))) {
    process.stderr.write(`${USAGE} (got ${JSON.stringify(argv.join(" "))})\n`);
    return 2;
  }
  try {
    const result = await check(name, exportsDir, values.digits ?? ["380527"], values.positions ?? ["3,10"], values.screenshot);
    process.stdout.write(JSON.stringify(result) + "\n");
    return 0;
  } catch (err) {
    process.stderr.write(`lab (${name}): ${failureLine(name, err)}\n`);
    return 2;
  }
}

exitAfter(main(process.argv.slice(2)));
