#!/usr/bin/env node
// Reference runner: feeds an ONNX model deterministic inputs, runs it with
// ONNX Runtime (onnxruntime-node) and writes the inputs and outputs as ONNX
// backend-test TensorProto files:
//
//   node models/ort_run.js MODEL.onnx OUT_DIR [options]
//     -> OUT_DIR/test_data_set_0/input_K.pb, output_K.pb
//   node models/ort_run.js MODEL.onnx [OUT_DIR] --bench [--warmup N] [--iterations N]
//     -> latency JSON on stdout
//
// Options:
//   --inputs DIR        reuse input_K.pb from DIR (a test_data_set_N folder, or
//                       a folder holding test_data_set_0) instead of generating
//   --threads N         intra-op threads (default 1; 0 = ORT's default)
//   --opt LEVEL         graph optimization: disabled|basic|extended|all (default all)
//   --seed S            seed for generated inputs (default 0)
//   --set N             write test_data_set_N (default 0)
//   --spec FILE         input-generation sidecar (default: model.json next to
//                       the model, if present, as written by export_models.py)
//   --dim NAME=V        value of a symbolic dim (repeatable), e.g. --dim batch=2
//   --int-range LO:HI   range [LO, HI) for integer id inputs (e.g. token ids)
//   --pad-tail N        zeroed tail positions of attention masks
//   --dist uniform|normal  distribution for float inputs (uniform: [-1, 1))
//   --bench, --warmup N (default 5), --iterations N (default 20)
//   --profile PREFIX    with --bench: after the timed runs, as many runs again in a
//                       second session with ORT's profiler on; its JSON trace is
//                       written to PREFIX_<date>.json, named in the output as
//                       "profile" (bench/node_times.py reads it)
//   --quiet             no per-tensor report on stderr
//
// Input generation, per graph input (sidecar "gen" entries override the
// guesses made from the input's name and type):
//   float*:  uniform [low, high) (default [-1, 1)) or normal(mean, std)
//   int ids: uniform integers in [low, high); with pad_tail, the padded tail
//            gets pad_value (default 0)
//   mask:    ones, with the last pad_tail positions of each row set to 0
//   segments (token_type_ids): 0 for the first half of the unpadded tokens,
//            1 for the second half, 0 on the padded tail
//   bool:    random 0/1
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

// ---------------------------------------------------------------------------
// ONNX TensorProto element types
// ---------------------------------------------------------------------------

// onnx enum -> [ort type name, TypedArray, bytes per element]
const ONNX_TYPES = {
  1: ['float32', Float32Array, 4],
  2: ['uint8', Uint8Array, 1],
  3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2],
  5: ['int16', Int16Array, 2],
  6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8],
  9: ['bool', Uint8Array, 1],
  10: ['float16', Uint16Array, 2],
  11: ['float64', Float64Array, 8],
  12: ['uint32', Uint32Array, 4],
  13: ['uint64', BigUint64Array, 8],
};
const ORT_TO_ONNX = {};
for (const [k, v] of Object.entries(ONNX_TYPES)) ORT_TO_ONNX[v[0]] = Number(k);

// ---------------------------------------------------------------------------
// Protobuf wire format (just what TensorProto needs)
// ---------------------------------------------------------------------------

class Writer {
  constructor() { this.parts = []; }
  bytes(b) { this.parts.push(Buffer.from(b)); }
  varint(v) {
    // v: Number or BigInt; negatives are encoded as 64-bit two's complement.
    let x = BigInt.asUintN(64, BigInt(v));
    const out = [];
    while (x >= 0x80n) { out.push(Number(x & 0x7fn) | 0x80); x >>= 7n; }
    out.push(Number(x));
    this.bytes(out);
  }
  tag(field, wire) { this.varint((field << 3) | wire); }
  lenDelimited(field, buf) { this.tag(field, 2); this.varint(buf.length); this.bytes(buf); }
  finish() { return Buffer.concat(this.parts); }
}

// TensorProto fields written: dims (1, unpacked varints, as onnx's python
// protobuf writes them), data_type (2), name (8), raw_data (9, little-endian).
function encodeTensorProto(name, onnxType, dims, raw) {
  const w = new Writer();
  for (const d of dims) { w.tag(1, 0); w.varint(d); }
  w.tag(2, 0); w.varint(onnxType);
  if (name !== undefined && name !== null) w.lenDelimited(8, Buffer.from(name, 'utf8'));
  w.lenDelimited(9, raw);
  return w.finish();
}

class Reader {
  constructor(buf) { this.buf = buf; this.pos = 0; }
  eof() { return this.pos >= this.buf.length; }
  varint() {
    let result = 0n, shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw new Error('truncated varint');
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
    return result; // unsigned 64-bit as BigInt
  }
  fixed32() { const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }
  take(n) {
    if (this.pos + n > this.buf.length) throw new Error('truncated field');
    const b = this.buf.subarray(this.pos, this.pos + n); this.pos += n; return b;
  }
  skip(wire) {
    if (wire === 0) this.varint();
    else if (wire === 1) this.take(8);
    else if (wire === 2) this.take(Number(this.varint()));
    else if (wire === 5) this.take(4);
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

// Repeated scalar field: packed (wire 2) or one element per tag.
function readRepeated(r, wire, elemWire, readOne, out) {
  if (wire === 2) {
    const sub = new Reader(r.take(Number(r.varint())));
    while (!sub.eof()) out.push(readOne(sub));
  } else if (wire === elemWire) {
    out.push(readOne(r));
  } else {
    throw new Error(`bad wire type ${wire} for repeated field`);
  }
}

function decodeTensorProto(buf) {
  const r = new Reader(buf);
  const t = { dims: [], dataType: 0, name: '', raw: null, floatData: [], int32Data: [],
    int64Data: [], doubleData: [], uint64Data: [], external: false };
  while (!r.eof()) {
    const key = Number(r.varint());
    const field = key >>> 3, wire = key & 7;
    switch (field) {
      case 1: readRepeated(r, wire, 0, (s) => BigInt.asIntN(64, s.varint()), t.dims); break;
      case 2: t.dataType = Number(r.varint()); break;
      case 4: readRepeated(r, wire, 5, (s) => s.take(4).readFloatLE(0), t.floatData); break;
      case 5: readRepeated(r, wire, 0, (s) => Number(BigInt.asIntN(32, s.varint())), t.int32Data); break;
      case 7: readRepeated(r, wire, 0, (s) => BigInt.asIntN(64, s.varint()), t.int64Data); break;
      case 8: t.name = r.take(Number(r.varint())).toString('utf8'); break;
      case 9: t.raw = Buffer.from(r.take(Number(r.varint()))); break;
      case 10: readRepeated(r, wire, 1, (s) => s.take(8).readDoubleLE(0), t.doubleData); break;
      case 11: readRepeated(r, wire, 0, (s) => s.varint(), t.uint64Data); break;
      case 14: if (Number(r.varint()) === 1) t.external = true; break;
      default: r.skip(wire);
    }
  }
  if (t.external) throw new Error(`tensor ${t.name}: external data is not supported`);
  const info = ONNX_TYPES[t.dataType];
  if (!info) throw new Error(`tensor ${t.name}: unsupported data_type ${t.dataType}`);
  const [ortType, Arr, size] = info;
  const dims = t.dims.map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw !== null) {
    if (t.raw.length !== n * size) throw new Error(`tensor ${t.name}: raw_data has ${t.raw.length} bytes, want ${n * size}`);
    data = new Arr(n);
    Buffer.from(data.buffer).set(t.raw); // host is little-endian (checked at start)
  } else {
    data = new Arr(n);
    let src;
    switch (t.dataType) {
      case 1: src = t.floatData; break;
      case 7: src = t.int64Data; break;
      case 11: src = t.doubleData; break;
      case 12: case 13: src = t.uint64Data; break;
      default: src = t.int32Data; // int8/16/32, uint8/16, bool, float16 (bits)
    }
    if (src.length !== n) throw new Error(`tensor ${t.name}: ${src.length} elements, want ${n}`);
    for (let i = 0; i < n; i++) {
      data[i] = (t.dataType === 13) ? BigInt.asUintN(64, BigInt(src[i])) : src[i];
    }
  }
  return { name: t.name, dataType: t.dataType, ortType, dims, data };
}

function typedToBuffer(a) { return Buffer.from(a.buffer, a.byteOffset, a.byteLength); }

// ---------------------------------------------------------------------------
// Deterministic random numbers: xoshiro128** seeded through splitmix32
// ---------------------------------------------------------------------------

function splitmix32(state) {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

class Rng {
  constructor(seed, stream) {
    const sm = splitmix32((Math.imul(seed >>> 0, 0x27d4eb2d) ^ Math.imul(stream + 1, 0x165667b1)) >>> 0);
    this.s = new Uint32Array([sm(), sm(), sm(), sm()]);
    if ((this.s[0] | this.s[1] | this.s[2] | this.s[3]) === 0) this.s[0] = 1;
  }
  u32() {
    const s = this.s;
    const x = Math.imul(s[1], 5);
    const result = Math.imul((x << 7) | (x >>> 25), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 11) | (s[3] >>> 21);
    return result;
  }
  // [0, 1) with 24 random bits: exact in float32
  uniform() { return (this.u32() >>> 8) / 16777216; }
  // integer in [lo, hi)
  int(lo, hi) { return lo + Math.floor(((this.u32() >>> 0) / 4294967296) * (hi - lo)); }
  normal() {
    // Box-Muller, one value per call (simple and deterministic)
    const u1 = (this.u32() + 1) / 4294967297, u2 = this.uniform();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

function usage(msg) {
  if (msg) process.stderr.write(`ort_run.js: ${msg}\n`);
  process.stderr.write('usage: node models/ort_run.js MODEL.onnx OUT_DIR [--inputs DIR] [--threads N] ' +
    '[--opt disabled|basic|extended|all] [--seed S] [--set N] [--spec FILE] [--dim NAME=V]... ' +
    '[--int-range LO:HI] [--pad-tail N] [--dist uniform|normal] ' +
    '[--bench [--warmup N] [--iterations N] [--profile PREFIX]] [--quiet]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { positional: [], threads: 1, opt: 'all', seed: 0, set: 0, dims: {}, bench: false,
    warmup: 5, iterations: 20, quiet: false };
  const intArg = (name, v) => {
    if (v === undefined || !/^-?\d+$/.test(v)) usage(`${name} needs an integer`);
    return parseInt(v, 10);
  };
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i];
    const next = () => { if (i + 1 >= argv.length) usage(`${x} needs a value`); return argv[++i]; };
    switch (x) {
      case '--inputs': a.inputs = next(); break;
      case '--threads': a.threads = intArg(x, next()); break;
      case '--opt': a.opt = next(); break;
      case '--seed': a.seed = intArg(x, next()); break;
      case '--set': a.set = intArg(x, next()); break;
      case '--spec': a.spec = next(); break;
      case '--dim': {
        const m = /^([^=]+)=(\d+)$/.exec(next());
        if (!m) usage('--dim wants NAME=VALUE');
        a.dims[m[1]] = parseInt(m[2], 10);
        break;
      }
      case '--int-range': {
        const m = /^(-?\d+):(-?\d+)$/.exec(next());
        if (!m || parseInt(m[2], 10) <= parseInt(m[1], 10)) usage('--int-range wants LO:HI with LO < HI');
        a.intRange = [parseInt(m[1], 10), parseInt(m[2], 10)];
        break;
      }
      case '--pad-tail': a.padTail = intArg(x, next()); break;
      case '--dist': a.dist = next(); if (!['uniform', 'normal'].includes(a.dist)) usage('--dist: uniform|normal'); break;
      case '--bench': a.bench = true; break;
      case '--warmup': a.warmup = intArg(x, next()); break;
      case '--iterations': a.iterations = intArg(x, next()); break;
      case '--profile': a.profile = next(); break;
      case '--quiet': a.quiet = true; break;
      case '-h': case '--help': usage();
      // falls through (usage exits)
      default:
        if (x.startsWith('--')) usage(`unknown option ${x}`);
        a.positional.push(x);
    }
  }
  if (!['disabled', 'basic', 'extended', 'all'].includes(a.opt)) usage('--opt: disabled|basic|extended|all');
  if (a.positional.length < 1 || a.positional.length > 2) usage();
  a.model = a.positional[0];
  a.outDir = a.positional[1];
  if (!a.outDir && !a.bench) usage('OUT_DIR is required unless --bench');
  if (a.iterations < 1) usage('--iterations must be >= 1');
  if (a.profile && !a.bench) usage('--profile needs --bench');
  return a;
}

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

function loadSpec(a) {
  const p = a.spec || path.join(path.dirname(a.model), 'model.json');
  if (!fs.existsSync(p)) {
    if (a.spec) throw new Error(`--spec ${p}: not found`);
    return { inputs: [], dims: {} };
  }
  const j = JSON.parse(fs.readFileSync(p, 'utf8'));
  return { inputs: j.inputs || [], dims: j.dims || {}, path: p };
}

function guessGen(name, type) {
  const n = name.toLowerCase();
  if (type.startsWith('float')) return { kind: 'uniform', low: -1, high: 1 };
  if (type === 'bool') return { kind: 'bool' };
  if (n.includes('mask')) return { kind: 'mask', pad_tail: 0 };
  if (n.includes('token_type') || n.includes('segment')) return { kind: 'segments', pad_tail: 0 };
  return { kind: 'int', low: 0, high: 100, guessed: true };
}

function concreteShape(meta, dims) {
  return meta.shape.map((d, i) => {
    if (typeof d === 'number' && d >= 0) return d;
    const key = (typeof d === 'string' && d) ? d : `${meta.name}:${i}`;
    if (dims[key] !== undefined) return dims[key];
    if (/batch/i.test(String(d))) return 1;
    throw new Error(`input ${meta.name}: dim ${i} is symbolic (${JSON.stringify(d)}); give --dim ${key}=V`);
  });
}

function generateInput(meta, shape, gen, rng, a) {
  const type = meta.type;
  const onnxType = ORT_TO_ONNX[type];
  if (!onnxType) throw new Error(`input ${meta.name}: unsupported type ${type}`);
  const Arr = ONNX_TYPES[onnxType][1];
  const n = shape.reduce((x, y) => x * y, 1);
  const data = new Arr(n);
  const L = shape.length ? shape[shape.length - 1] : 1; // positions per row
  const padTail = Math.min(L - 1 < 0 ? 0 : L - 1,
    a.padTail !== undefined ? a.padTail : (gen.pad_tail || 0));
  const valid = L - padTail;
  const put = (i, v) => { data[i] = (Arr === BigInt64Array || Arr === BigUint64Array) ? BigInt(v) : v; };
  let kind = gen.kind;
  if (type.startsWith('float') && a.dist) kind = a.dist;
  if (type === 'float16') throw new Error(`input ${meta.name}: float16 generation not supported; use --inputs`);
  switch (kind) {
    case 'uniform': {
      const lo = gen.low !== undefined ? gen.low : -1, hi = gen.high !== undefined ? gen.high : 1;
      for (let i = 0; i < n; i++) data[i] = lo + (hi - lo) * rng.uniform();
      break;
    }
    case 'normal': {
      const mu = gen.mean || 0, sd = gen.std !== undefined ? gen.std : 1;
      for (let i = 0; i < n; i++) data[i] = mu + sd * rng.normal();
      break;
    }
    case 'int': {
      let lo = gen.low !== undefined ? gen.low : 0, hi = gen.high !== undefined ? gen.high : 100;
      if (a.intRange) [lo, hi] = a.intRange;
      else if (gen.guessed) process.stderr.write(`ort_run.js: ${meta.name}: no integer range given, using [${lo}, ${hi}) (see --int-range)\n`);
      const padValue = gen.pad_value !== undefined ? gen.pad_value : 0;
      for (let i = 0; i < n; i++) put(i, (i % L) >= valid ? padValue : rng.int(lo, hi));
      break;
    }
    case 'mask':
      for (let i = 0; i < n; i++) put(i, (i % L) < valid ? 1 : 0);
      break;
    case 'segments': {
      const first = Math.ceil(valid / 2);
      for (let i = 0; i < n; i++) { const p = i % L; put(i, (p >= first && p < valid) ? 1 : 0); }
      break;
    }
    case 'bool':
      for (let i = 0; i < n; i++) data[i] = rng.u32() & 1;
      break;
    case 'const':
      for (let i = 0; i < n; i++) put(i, gen.value);
      break;
    default:
      throw new Error(`input ${meta.name}: unknown generator kind ${kind}`);
  }
  return { name: meta.name, ortType: type, dataType: onnxType, dims: shape, data };
}

function readInputs(dir, inputMeta) {
  let d = dir;
  if (!fs.existsSync(path.join(d, 'input_0.pb')) && fs.existsSync(path.join(d, 'test_data_set_0', 'input_0.pb'))) {
    d = path.join(d, 'test_data_set_0');
  }
  const files = fs.readdirSync(d).filter((f) => /^input_\d+\.pb$/.test(f))
    .sort((x, y) => parseInt(x.slice(6), 10) - parseInt(y.slice(6), 10));
  const tensors = files.map((f) => decodeTensorProto(fs.readFileSync(path.join(d, f))));
  const byName = new Map(tensors.filter((t) => t.name).map((t) => [t.name, t]));
  return inputMeta.map((m, k) => {
    const t = byName.get(m.name) || (tensors[k] && !tensors[k].name ? tensors[k] : undefined);
    if (!t) throw new Error(`--inputs ${d}: no tensor for graph input ${k} (${m.name})`);
    if (t.ortType !== m.type) throw new Error(`--inputs: ${m.name} is ${t.ortType}, graph wants ${m.type}`);
    return { ...t, name: m.name };
  });
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

function stats(t) {
  const d = t.data;
  if (!d.length) return 'empty';
  let mn = Infinity, mx = -Infinity, sum = 0, bad = 0;
  for (let i = 0; i < d.length; i++) {
    const v = Number(d[i]);
    if (!Number.isFinite(v)) { bad++; continue; }
    if (v < mn) mn = v;
    if (v > mx) mx = v;
    sum += v;
  }
  const mean = sum / Math.max(1, d.length - bad);
  return `min ${mn.toPrecision(4)} max ${mx.toPrecision(4)} mean ${mean.toPrecision(4)}` + (bad ? ` non-finite ${bad}` : '');
}

function percentile(sorted, p) {
  const k = Math.max(0, Math.ceil(p * sorted.length) - 1);
  return sorted[Math.min(k, sorted.length - 1)];
}

// Runs the model a.warmup + a.iterations times in a second session with ORT's profiler on (a
// separate session, so the timed runs above carry no profiling), and returns the trace's path:
// ORT names it PREFIX_<date>.json itself, so it is the newest such file.
async function profileRuns(ort, a, opts, feeds) {
  const dir = path.dirname(path.resolve(a.profile)), base = path.basename(a.profile);
  const session = await ort.InferenceSession.create(a.model,
    { ...opts, enableProfiling: true, profileFilePrefix: path.resolve(a.profile) });
  for (let i = 0; i < a.warmup + a.iterations; i++) await session.run(feeds);
  session.endProfiling();
  if (session.release) await session.release();
  const traces = fs.readdirSync(dir).filter((f) => f.startsWith(base + '_') && f.endsWith('.json'))
    .map((f) => path.join(dir, f)).sort((x, y) => fs.statSync(y).mtimeMs - fs.statSync(x).mtimeMs);
  if (!traces.length) throw new Error(`ORT wrote no profile named ${a.profile}_*.json`);
  return traces[0];
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (os.endianness() !== 'LE') throw new Error('raw_data is little-endian; this host is not');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node (run: cd models && npm ci --ignore-scripts): ${e.message}`);
  }
  const opts = { graphOptimizationLevel: a.opt, executionMode: 'sequential' };
  if (a.threads > 0) { opts.intraOpNumThreads = a.threads; opts.interOpNumThreads = 1; }
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, opts);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const inputMeta = session.inputMetadata
    ? session.inputMetadata
    : session.inputNames.map((name) => ({ name, type: 'float32', shape: [] }));
  for (const m of inputMeta) if (!m.isTensor && m.isTensor !== undefined) throw new Error(`input ${m.name} is not a tensor`);

  let inputs;
  if (a.inputs) {
    inputs = readInputs(a.inputs, inputMeta);
  } else {
    const spec = loadSpec(a);
    const dims = { ...spec.dims, ...a.dims };
    inputs = inputMeta.map((m, k) => {
      const s = spec.inputs.find((x) => x.name === m.name);
      const gen = (s && s.gen) ? s.gen : guessGen(m.name, m.type);
      return generateInput(m, concreteShape(m, dims), gen, new Rng(a.seed, k), a);
    });
  }
  const feeds = {};
  for (const t of inputs) feeds[t.name] = new ort.Tensor(t.ortType, t.data, t.dims);

  const t1 = process.hrtime.bigint();
  const results = await session.run(feeds);
  const runMs = Number(process.hrtime.bigint() - t1) / 1e6;
  const outputs = session.outputNames.map((name) => {
    const r = results[name];
    const onnxType = ORT_TO_ONNX[r.type];
    if (!onnxType) throw new Error(`output ${name}: unsupported type ${r.type}`);
    return { name, ortType: r.type, dataType: onnxType, dims: r.dims.map(Number), data: r.data };
  });

  if (a.outDir) {
    const dir = path.join(a.outDir, `test_data_set_${a.set}`);
    fs.mkdirSync(dir, { recursive: true });
    for (const f of fs.readdirSync(dir)) if (/^(input|output)_\d+\.pb$/.test(f)) fs.unlinkSync(path.join(dir, f));
    inputs.forEach((t, k) => fs.writeFileSync(path.join(dir, `input_${k}.pb`),
      encodeTensorProto(t.name, t.dataType, t.dims, typedToBuffer(t.data))));
    outputs.forEach((t, k) => fs.writeFileSync(path.join(dir, `output_${k}.pb`),
      encodeTensorProto(t.name, t.dataType, t.dims, typedToBuffer(t.data))));
    if (!a.quiet) {
      process.stderr.write(`${a.model}: load ${loadMs.toFixed(1)} ms, run ${runMs.toFixed(1)} ms ` +
        `(opt ${a.opt}, threads ${a.threads || 'default'}) -> ${dir}\n`);
      inputs.forEach((t, k) => process.stderr.write(`  input_${k}  ${t.name} ${t.ortType}[${t.dims}] ${stats(t)}\n`));
      outputs.forEach((t, k) => process.stderr.write(`  output_${k} ${t.name} ${t.ortType}[${t.dims}] ${stats(t)}\n`));
    }
  }

  if (a.bench) {
    for (let i = 0; i < a.warmup; i++) await session.run(feeds);
    const times = [];
    for (let i = 0; i < a.iterations; i++) {
      const s = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    const sorted = [...times].sort((x, y) => x - y);
    const r3 = (x) => Math.round(x * 1000) / 1000;
    const out = {
      model: a.model,
      runtime: `onnxruntime-node ${ort.env.versions ? ort.env.versions.node : ''}`.trim(),
      opt: a.opt,
      threads: a.threads,
      inputs: Object.fromEntries(inputs.map((t) => [t.name, t.dims])),
      load_ms: r3(loadMs),
      first_run_ms: r3(runMs),
      warmup: a.warmup,
      iterations: a.iterations,
      median_ms: r3(sorted.length % 2 ? sorted[(sorted.length - 1) / 2]
        : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2),
      p90_ms: r3(percentile(sorted, 0.9)),
      mean_ms: r3(times.reduce((x, y) => x + y, 0) / times.length),
      min_ms: r3(sorted[0]),
      max_ms: r3(sorted[sorted.length - 1]),
      peak_rss_kb: process.resourceUsage().maxRSS,
    };
    if (a.profile) out.profile = await profileRuns(ort, a, opts, feeds);
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  if (session.release) await session.release();
}

if (require.main === module) {
  main().catch((e) => { process.stderr.write(`ort_run.js: ${e.message}\n`); process.exit(1); });
}

module.exports = { encodeTensorProto, decodeTensorProto, Rng };
