// The reference of exactq's tokenizer test: Hugging Face `tokenizers` (its Node binding) encodes
// and decodes every string of strings.json with each real tokenizer.json of tokenizers.json.
//   node reference.js OUT.json
// Writes {name: {sha256, vocab, cases: [...]}}; exits 1 (with a message) where a file is missing
// or its sha256 is not the pinned one.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node reference.js OUT.json');
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, 'tokenizers.json'), 'utf8'));
  const strings = JSON.parse(fs.readFileSync(path.join(__dirname, 'strings.json'), 'utf8'));
  const result = {};
  for (const entry of manifest.tokenizers) {
    const file = path.join(__dirname, entry.file);
    const bytes = fs.readFileSync(file);
    const sha = crypto.createHash('sha256').update(bytes).digest('hex');
    if (sha !== entry.sha256) throw new Error(`${file}: sha256 ${sha} is not the pinned ${entry.sha256}`);
    const t = Tokenizer.fromFile(file);
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
    result[entry.name] = { sha256: sha, file, cases };
  }
  fs.writeFileSync(out, JSON.stringify(result));
}

main().catch((e) => {
  console.error(`hf-compare: ${e.message}`);
  process.exit(1);
});
