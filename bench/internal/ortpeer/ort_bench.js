// Times ONNX models in onnxruntime-node for bench/ort (the Go side runs
// vrun and talks to this script through stdin and stdout, one JSON object
// per line each way).
//
//   {"cmd": "load", "model": PATH, "threads": N, "inputs": {NAME: {"dtype", "dims", "data": BASE64}}}
//       -> {"id": K, "outputs": {NAME: {"dtype", "dims", "data"}}, "version": V}
//   {"cmd": "bench", "id": K, "runs": N}
//       -> {"ms": [t1, ..., tN]}          (each run's wall time, in ms)
//   {"cmd": "profile", "model": PATH, "threads": N, "inputs": {...}, "runs": R, "prefix": P}
//       -> {"file": F}   (onnxruntime's profile of 3 warm-up runs and R
//                         timed ones, a JSON trace written to F = P_*.json)
//
// Sessions use onnxruntime's default graph optimisations (level "all"),
// the sequential executor, N intra-op threads and one inter-op thread:
// the peer as a user gets it. Errors come back as {"error": MESSAGE}.
const readline = require('readline');
const ort = require('onnxruntime-node');

const arrays = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array,
  int64: BigInt64Array, uint8: Uint8Array, int8: Int8Array, bool: Uint8Array,
  float16: Uint16Array,
};

const sessions = [];

function tensor(t) {
  const buf = Buffer.from(t.data, 'base64');
  const A = arrays[t.dtype];
  const copy = new Uint8Array(buf.length);
  copy.set(buf);
  return new ort.Tensor(t.dtype, new A(copy.buffer, 0, buf.length / A.BYTES_PER_ELEMENT), t.dims);
}

async function load(req) {
  const session = await ort.InferenceSession.create(req.model, {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: req.threads,
    interOpNumThreads: 1,
  });
  const feeds = {};
  for (const [name, t] of Object.entries(req.inputs)) feeds[name] = tensor(t);
  const res = await session.run(feeds);
  const outputs = {};
  for (const [name, t] of Object.entries(res)) {
    const d = t.data;
    outputs[name] = { dtype: t.type, dims: t.dims.map(Number), data: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
  }
  sessions.push({ session, feeds });
  let version = '';
  try { version = require('onnxruntime-node/package.json').version; } catch (e) { /* unknown */ }
  return { id: sessions.length - 1, outputs, version };
}

async function bench(req) {
  const { session, feeds } = sessions[req.id];
  const ms = [];
  for (let i = 0; i < req.runs; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return { ms };
}

async function profile(req) {
  const session = await ort.InferenceSession.create(req.model, {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: req.threads,
    interOpNumThreads: 1,
    enableProfiling: true,
    profileFilePrefix: req.prefix,
  });
  const feeds = {};
  for (const [name, t] of Object.entries(req.inputs)) feeds[name] = tensor(t);
  for (let i = 0; i < req.runs + 3; i++) await session.run(feeds);
  // The trace is written when profiling ends (onnxruntime-node does not
  // return its name): the newest P_*.json.
  if (session.endProfiling) session.endProfiling();
  await session.release();
  const fs = require('fs');
  const path = require('path');
  const dir = path.dirname(req.prefix), base = path.basename(req.prefix) + '_';
  let best = '', mtime = -1;
  for (const f of fs.readdirSync(dir)) {
    if (!f.startsWith(base) || !f.endsWith('.json')) continue;
    const st = fs.statSync(path.join(dir, f));
    if (st.mtimeMs > mtime) { best = path.join(dir, f); mtime = st.mtimeMs; }
  }
  if (!best) throw new Error('no profile written for ' + req.prefix);
  return { file: best };
}

const handlers = { load, bench, profile };

async function main() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let out;
    try {
      const req = JSON.parse(line);
      const h = handlers[req.cmd];
      if (!h) throw new Error('unknown command ' + req.cmd);
      out = await h(req);
    } catch (e) {
      out = { error: String(e && e.message || e) };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
}

main().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
