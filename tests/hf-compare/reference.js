// The reference of exactq's tokenizer test: Hugging Face `tokenizers` (its Node binding) encodes
// and decodes every string of strings.json with each real tokenizer.json of tokenizers.json, and
// with each of its variants (a real file with some sections replaced).
//   node reference.js OUT.json [real|variants]   (both when not given)
// Writes {name: {sha256, vocab, cases: [...]}}; exits 1 (with a message) where a file is missing
// or its sha256 is not the pinned one.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const out = process.argv[2];
  const only = process.argv[3];
  if (!out || (only && only !== 'real' && only !== 'variants')) throw new Error('usage: node reference.js OUT.json [real|variants]');
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, 'tokenizers.json'), 'utf8'));
  const strings = JSON.parse(fs.readFileSync(path.join(__dirname, 'strings.json'), 'utf8'));
  const result = {};
  const files = {};
  const runs = [];
  for (const entry of manifest.tokenizers) {
    const file = path.join(__dirname, entry.file);
    const bytes = fs.readFileSync(file);
    const sha = crypto.createHash('sha256').update(bytes).digest('hex');
    if (sha !== entry.sha256) throw new Error(`${file}: sha256 ${sha} is not the pinned ${entry.sha256}`);
    files[entry.name] = { text: bytes.toString('utf8'), entry, sha };
    if (only !== 'variants') runs.push({ name: entry.name, entry, sha, file, tokenizer: Tokenizer.fromFile(file) });
  }
  // A variant: its base file with some top-level sections replaced.
  for (const v of only === 'real' ? [] : manifest.variants || []) {
    const base = files[v.base];
    const json = Object.assign(JSON.parse(base.text), v.set);
    runs.push({ name: v.name, entry: base.entry, sha: base.sha, file: base.entry.file, tokenizer: Tokenizer.fromString(JSON.stringify(json)) });
  }
  for (const { name, entry, sha, file, tokenizer: t } of runs) {
    const cases = [];
    for (const text of strings) {
      const ids = (await t.encode(text, null, { addSpecialTokens: true })).getIds();
      const plain = (await t.encode(text, null, { addSpecialTokens: false })).getIds();
      // A prefix cut in the middle: a character split across byte tokens decodes as HF decodes it.
      const half = plain.slice(0, Math.floor(plain.length / 2));
      // An id past the tokenizer (a padded embedding's) decodes to nothing.
      const padded = plain.concat([entry.beyond_id]);
      cases.push({
        text,
        ids,
        ids_plain: plain,
        decoded: await t.decode(ids, false),
        decoded_skip: await t.decode(ids, true),
        half,
        decoded_half: await t.decode(half, false),
        padded,
        decoded_padded: await t.decode(padded, false),
      });
    }
    result[name] = { sha256: sha, file, cases };
  }
  fs.writeFileSync(out, JSON.stringify(result));
}

main().catch((e) => {
  console.error(`hf-compare: ${e.message}`);
  process.exit(1);
});
