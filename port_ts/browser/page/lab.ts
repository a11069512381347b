// The labs a reader uses (docs/browsers.md, "The lab page"), built only on the port's core
// (through core.ts) and an exported baked run (`verify export attention`: exports/attention/
// train.reversal.json, served by `node port_ts/browser/lab.ts serve` as exports/<file>):
//   Reverse it yourself  six digits -> the trained Transformer's greedy decode (docs/reversal.md),
//                        and decoder block 0's cross-attention of the final decode pass, per head
//   Positions            two positions -> the cosine similarity of their sinusoidal codes
// Everything runs on the page's main thread, on each keystroke. What the page shows is also
// written into data attributes, exactly (each number as JavaScript prints it: the shortest text
// that reads back to the same double), for a test to read (tests/test_browsers.py):
//   #lab              data-state loading | ready | error
//   #reversed         data-digits (the input decoded), data-tokens (JSON: the emitted ids, <eos> included)
//   #heads            data-weights (JSON: H x T x S, rows = emitted tokens, columns = source tokens)
//   #cosine           data-positions ("i,j"), data-cosine

import {
  type Tensor, BOS, DIGIT0, EOS, encodeInputs, greedyDecode, positionSimilarity, productEngine,
  reversalModelConfig, sinusoidalTable,
} from "./core.ts";

const RUN = "train.reversal";
const POSITIONS = 100; // positions 0..99 in the positions lab
const base = new URL("../../../", location.href).href; // the page is <session>/port/browser/page/lab.html

interface TensorDoc { dtype: string; shape: number[]; data: (number | string)[] }
interface ExportDoc { id: string; config: Record<string, number>; parameters: Record<string, TensorDoc> }

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function toTensor(doc: TensorDoc): Tensor {
  return { shape: [...doc.shape], data: Float64Array.from(doc.data, Number) }; // "NaN", "Infinity" read as numbers
}

function tokenText(id: number): string {
  if (id === EOS) return "<eos>";
  if (id === BOS) return "<bos>";
  return id >= DIGIT0 && id < DIGIT0 + 10 ? String(id - DIGIT0) : `?${id}`;
}

function heatmap(weights: number[][], rows: string[], cols: string[], head: number): HTMLElement {
  const figure = document.createElement("figure");
  const caption = document.createElement("figcaption");
  caption.textContent = `head ${head}`;
  const table = document.createElement("table");
  table.className = "heat";
  const header = table.insertRow();
  header.appendChild(document.createElement("th"));
  for (const c of cols) header.appendChild(Object.assign(document.createElement("th"), { textContent: c }));
  weights.forEach((row, t) => {
    const tr = table.insertRow();
    tr.appendChild(Object.assign(document.createElement("th"), { textContent: rows[t] }));
    row.forEach((w, s) => {
      const td = tr.insertCell();
      td.dataset.weight = String(w);
      td.dataset.row = String(t);
      td.dataset.col = String(s);
      td.title = `output ${rows[t]} -> source ${cols[s]}: ${w}`;
      const shade = Math.round(255 * (1 - w));
      td.style.background = `rgb(${shade}, ${shade}, 255)`;
    });
  });
  figure.append(caption, table);
  return figure;
}

function reverseLab(run: ExportDoc): () => void {
  const model = reversalModelConfig(run.config);
  const maxDigits = run.config.max_digits, minDigits = run.config.min_digits;
  const P = maxDigits + 1;
  const params = Object.fromEntries(Object.entries(run.parameters).map(([k, v]) => [k, toTensor(v)]));
  const input = $<HTMLInputElement>("digits"), out = $<HTMLOutputElement>("reversed");
  const heads = $<HTMLDivElement>("heads"), note = $<HTMLParagraphElement>("reverse-note");
  const update = () => {
    const text = input.value;
    if (!/^\d*$/.test(text) || text.length < minDigits || text.length > maxDigits) {
      out.textContent = "";
      delete out.dataset.digits;
      delete out.dataset.tokens;
      delete heads.dataset.weights;
      heads.replaceChildren();
      note.textContent = minDigits === maxDigits ? `Type ${maxDigits} digits.` : `Type ${minDigits} to ${maxDigits} digits.`;
      return;
    }
    const digits = [...text].map(Number);
    const { src, srcLens } = encodeInputs([digits], maxDigits);
    const dec = greedyDecode(params, model, src, srcLens, P, BOS, EOS);
    const T = dec.lengths.data[0];
    const tokens = Array.from(dec.tokens.data.subarray(0, T));
    const cross = dec.crossWeights[0]; // (1, H, Tq, S): rows 0..T-1 are the emitted tokens' maps
    const [, H, Tq, S] = cross.shape;
    const weights = Array.from({ length: H }, (_, h) => Array.from({ length: T }, (_, t) =>
      Array.from(cross.data.subarray((h * Tq + t) * S, (h * Tq + t + 1) * S))));
    const emitted = tokens.map(tokenText);
    out.textContent = emitted.filter((t) => t !== "<eos>").join("");
    out.dataset.digits = text;
    out.dataset.tokens = JSON.stringify(tokens);
    heads.dataset.weights = JSON.stringify(weights);
    const cols = [...digits.map(String), "<eos>", ...Array(Math.max(0, S - digits.length - 1)).fill("<pad>")];
    heads.replaceChildren(...weights.map((w, h) => heatmap(w, emitted, cols, h)));
    const reversed = [...digits].reverse().join("");
    note.textContent = out.textContent === reversed && tokens[T - 1] === EOS ? "Reversed exactly." : `Not quite: ${reversed} was the answer.`;
  };
  input.addEventListener("input", update);
  return update;
}

function positionsLab(d: number): () => void {
  const similarity = positionSimilarity(sinusoidalTable(POSITIONS, d)); // (L, L)
  const i = $<HTMLInputElement>("pos-i"), j = $<HTMLInputElement>("pos-j"), out = $<HTMLOutputElement>("cosine");
  $<HTMLSpanElement>("pos-d").textContent = String(d);
  const update = () => {
    const a = Number(i.value), b = Number(j.value);
    const valid = [i.value, j.value].every((v) => /^\d+$/.test(v)) && a < POSITIONS && b < POSITIONS;
    if (!valid) {
      out.textContent = `positions 0..${POSITIONS - 1}`;
      delete out.dataset.cosine;
      delete out.dataset.positions;
      return;
    }
    const c = similarity.data[a * POSITIONS + b];
    out.textContent = c.toFixed(4);
    out.dataset.cosine = String(c);
    out.dataset.positions = `${a},${b}`;
  };
  i.addEventListener("input", update);
  j.addEventListener("input", update);
  return update;
}

async function main(): Promise<void> {
  const lab = $<HTMLElement>("lab"), note = $<HTMLParagraphElement>("lab-note");
  try {
    const response = await fetch(`${base}exports/${RUN}.json`);
    if (!response.ok) {
      throw new Error(`the baked run ${RUN} is not exported (HTTP ${response.status}): run \`verify export attention --case ${RUN}\``);
    }
    const run = (await response.json()) as ExportDoc;
    reverseLab(run)();
    positionsLab(run.config.d)();
    note.textContent = `The port's core in this browser, with the parameters of ${run.id} (products: ` +
      `${productEngine.simd ? "WebAssembly SIMD where large enough" : "JavaScript only, no WebAssembly SIMD here"}).`;
    lab.dataset.state = "ready";
  } catch (err) {
    note.textContent = (err as Error).message;
    note.className = "error";
    lab.dataset.state = "error";
  }
}

void main();
