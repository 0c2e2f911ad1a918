// Rampart's /v1 gateway through the official openai Node SDK (v4): chat whole and streamed, a
// stream broken mid-way (the SDK must raise), embeddings in the SDK's default encoding (base64,
// decoded by the SDK) and as floats, models.list and models.retrieve, and an unknown model
// (NotFoundError); the Files API: an upload streamed from a file (fs.createReadStream), list
// paged, retrieve, content, delete, a 404 and a bad purpose (400).
// run_check.py starts the fake upstream and rampart and sets:
//   RAMPART_BASE_URL   http://127.0.0.1:PORT/v1
//   CHAT_MODEL         a model answered by the fake upstream with CHAT_ANSWER
//   EMBEDDING_MODEL    Rampart's local text_embedding model (64 dimensions)
// Prints one line per check; exits 1 on the first failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { APIError, BadRequestError, NotFoundError } from 'openai';

const baseURL = process.env.RAMPART_BASE_URL;
const chatModel = process.env.CHAT_MODEL;
const chatAnswer = process.env.CHAT_ANSWER;
const embeddingModel = process.env.EMBEDDING_MODEL;
const dimensions = 64;

const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 20000 });
const messages = [{ role: 'user', content: 'Say hello' }];

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function unitLength(vector) {
  const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
  return Math.abs(norm - 1) < 1e-4;
}

const checks = {
  async 'chat, whole'() {
    const completion = await client.chat.completions.create({ model: chatModel, messages });
    const content = completion.choices[0].message.content;
    check(content === chatAnswer, `content ${JSON.stringify(content)}`);
    check(completion.usage.total_tokens > 0, `usage ${JSON.stringify(completion.usage)}`);
    return content;
  },

  async 'chat, streamed'() {
    const stream = await client.chat.completions.create({
      model: chatModel, messages, stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let chunks = 0;
    let usage = null;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) text += choice.delta?.content ?? '';
    }
    check(text === chatAnswer, `streamed text ${JSON.stringify(text)}`);
    check(usage && usage.total_tokens > 0, `usage ${JSON.stringify(usage)}`);
    return `${chunks} chunks`;
  },

  async 'chat, stream broken after tokens raises'() {
    const stream = await client.chat.completions.create({
      model: chatModel, messages, stream: true, fake_fault: 'cut_after=3',
    });
    let text = '';
    try {
      for await (const chunk of stream) {
        for (const choice of chunk.choices) text += choice.delta?.content ?? '';
      }
    } catch (error) {
      check(text.length > 0, 'no tokens before the break');
      return `raised ${error.constructor.name} after ${JSON.stringify(text)}: ${error.message}`;
    }
    throw new Error(`a broken stream ended without an error after ${JSON.stringify(text)}`);
  },

  async 'embeddings, default encoding (base64)'() {
    const result = await client.embeddings.create({
      model: embeddingModel, input: ['The cat sat on the mat', '我喜欢机器学习'],
    });
    check(result.data.length === 2, `${result.data.length} embeddings`);
    for (const item of result.data) {
      check(Array.isArray(item.embedding), `embedding is ${typeof item.embedding}`);
      check(item.embedding.length === dimensions, `${item.embedding.length} dimensions`);
      check(unitLength(item.embedding), 'not unit length');
    }
    const floats = await client.embeddings.create({
      model: embeddingModel, input: ['The cat sat on the mat', '我喜欢机器学习'],
      encoding_format: 'float',
    });
    for (let i = 0; i < 2; i += 1) {
      const a = result.data[i].embedding;
      const b = floats.data[i].embedding;
      const diff = Math.max(...a.map((value, j) => Math.abs(value - b[j])));
      check(diff < 1e-6, `base64 and float differ by ${diff}`);
    }
    return `${dimensions} dimensions, base64 equals float`;
  },

  async 'models.list and models.retrieve'() {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    check(ids.includes(chatModel) && ids.includes(embeddingModel), `ids ${ids}`);
    const model = await client.models.retrieve(chatModel);
    check(model.id === chatModel && model.object === 'model', JSON.stringify(model));
    return `${ids.length} models`;
  },

  async 'files: upload, list, retrieve, content, delete'() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rampart-files-'));
    const file = path.join(dir, 'notes.txt');
    // Large enough to come in many pieces; lines that look like multipart delimiters.
    const text = 'Rampart keeps documents in the building.\r\n--boundary\n'.repeat(40000);
    fs.writeFileSync(file, text);
    try {
      const created = await client.files.create({
        file: fs.createReadStream(file), purpose: 'assistants' });
      check(created.id.startsWith('file-') && created.object === 'file' &&
            created.bytes === Buffer.byteLength(text) && created.filename === 'notes.txt' &&
            created.purpose === 'assistants' && created.status === 'processed' &&
            created.created_at > 0, `created ${JSON.stringify(created)}`);
      const second = await client.files.create({
        file: new File(['second'], 'second.md'), purpose: 'user_data' });
      const ids = [];
      for await (const listed of client.files.list({ limit: 1 })) ids.push(listed.id);
      check(ids.includes(created.id) && ids.includes(second.id), `listed ${ids}`);
      const retrieved = await client.files.retrieve(created.id);
      check(retrieved.id === created.id && retrieved.filename === 'notes.txt',
            `retrieved ${JSON.stringify(retrieved)}`);
      const content = await (await client.files.content(created.id)).text();
      check(content === text, `content of ${content.length} characters`);
      const deleted = await client.files.del(created.id);
      check(deleted.id === created.id && deleted.object === 'file' && deleted.deleted === true,
            `deleted ${JSON.stringify(deleted)}`);
      await client.files.del(second.id);
      try {
        await client.files.retrieve(created.id);
        throw new Error('a deleted file was retrieved');
      } catch (error) {
        check(error instanceof NotFoundError, `raised ${error.constructor.name}: ${error.message}`);
      }
      try {
        await client.files.create({ file: new File(['x'], 'x.txt'), purpose: 'no-such-purpose' });
        throw new Error('a bad purpose was accepted');
      } catch (error) {
        check(error instanceof BadRequestError, `raised ${error.constructor.name}: ${error.message}`);
      }
      return `${created.id}, ${created.bytes} bytes`;
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },

  async 'unknown model raises NotFoundError'() {
    try {
      await client.chat.completions.create({ model: 'no-such-model', messages });
    } catch (error) {
      check(error instanceof NotFoundError, `raised ${error.constructor.name}: ${error.message}`);
      check(error instanceof APIError && error.status === 404, `status ${error.status}`);
      return error.message;
    }
    throw new Error('an unknown model was answered');
  },
};

let failed = false;
for (const [name, run] of Object.entries(checks)) {
  try {
    const note = await run();
    console.log(`PASS ${name}: ${note}`);
  } catch (error) {
    failed = true;
    console.log(`FAIL ${name}: ${error.stack ?? error}`);
  }
}
process.exit(failed ? 1 : 0);
