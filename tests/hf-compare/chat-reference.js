// The reference of exactq's chat-template test: @huggingface/jinja renders every message list of
// CHATS.json with the chat_template of each real tokenizer_config.json of tokenizers.json, with
// add_generation_prompt and the config's bos_token and eos_token, as apply_chat_template does.
//   node chat-reference.js CHATS.json OUT.json
// CHATS.json: [{name, messages: [{role, content}]}]. Writes {config name: {sha256, renders:
// [{name, text} or {name, error}]}}: `error` where the template refuses the list (raise_exception).
// Exits 1 (with a message) where a file is missing or its sha256 is not the pinned one.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');

// A special token in tokenizer_config.json: its text, or an object holding it as `content`.
function tokenText(token) {
  return token && typeof token === 'object' ? token.content : token;
}

function main() {
  const [chatsFile, out] = process.argv.slice(2);
  if (!chatsFile || !out) throw new Error('usage: node chat-reference.js CHATS.json OUT.json');
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, 'tokenizers.json'), 'utf8'));
  const chats = JSON.parse(fs.readFileSync(chatsFile, 'utf8'));
  const result = {};
  for (const entry of manifest.tokenizers) {
    const file = path.join(__dirname, entry.config_file);
    const bytes = fs.readFileSync(file);
    const sha = crypto.createHash('sha256').update(bytes).digest('hex');
    if (sha !== entry.config_sha256) throw new Error(`${file}: sha256 ${sha} is not the pinned ${entry.config_sha256}`);
    const config = JSON.parse(bytes.toString('utf8'));
    if (typeof config.chat_template !== 'string') throw new Error(`${file}: chat_template is not one template string`);
    const template = new Template(config.chat_template);
    const renders = chats.map(({ name, messages }) => {
      try {
        const text = template.render({
          messages,
          add_generation_prompt: true,
          bos_token: tokenText(config.bos_token),
          eos_token: tokenText(config.eos_token),
        });
        return { name, text };
      } catch (e) {
        return { name, error: e.message };
      }
    });
    result[entry.name] = { sha256: sha, renders };
  }
  fs.writeFileSync(out, JSON.stringify(result));
}

try {
  main();
} catch (e) {
  console.error(`hf-compare: ${e.message}`);
  process.exit(1);
}
