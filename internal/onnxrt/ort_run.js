// Runs ONNX models in onnxruntime-node (the export tests use it).
// Usage: node ort_run.js REQUEST.json. A request is
//   {"model": PATH, "inputs": {NAME: {"dtype": "float32"|..., "dims": [...], "data": BASE64}}}
// with raw little-endian element bytes; the script prints the outputs in
// the same form, as JSON, on stdout. A JSON array of requests gives an
// array of results, each {"outputs": {...}} or {"error": MESSAGE}.
const fs = require('fs');
const ort = require('onnxruntime-node');

const arrays = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array,
  int64: BigInt64Array, uint8: Uint8Array, int8: Int8Array, bool: Uint8Array,
  float16: Uint16Array,
};

async function run(req) {
  const session = await ort.InferenceSession.create(req.model, { graphOptimizationLevel: 'disabled' });
  const feeds = {};
  for (const [name, t] of Object.entries(req.inputs)) {
    const buf = Buffer.from(t.data, 'base64');
    const A = arrays[t.dtype];
    const copy = new Uint8Array(buf.length);
    copy.set(buf);
    feeds[name] = new ort.Tensor(t.dtype, new A(copy.buffer, 0, buf.length / A.BYTES_PER_ELEMENT), t.dims);
  }
  const res = await session.run(feeds);
  const out = {};
  for (const [name, t] of Object.entries(res)) {
    const d = t.data;
    out[name] = { dtype: t.type, dims: t.dims.map(Number), data: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
  }
  return out;
}

async function main() {
  const req = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  if (!Array.isArray(req)) {
    process.stdout.write(JSON.stringify(await run(req)));
    return;
  }
  const results = [];
  for (const r of req) {
    try {
      results.push({ outputs: await run(r) });
    } catch (e) {
      results.push({ error: String(e && e.message || e) });
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
