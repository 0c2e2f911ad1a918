// Rampart's /v1 gateway through the official openai Node SDK (v4): chat whole and streamed, a
// stream broken mid-way (the SDK must raise), embeddings in the SDK's default encoding (base64,
// decoded by the SDK) and as floats, models.list and models.retrieve, and an unknown model
// (NotFoundError); the Files API: an upload streamed from a file (fs.createReadStream), list
// paged, retrieve, content, delete, a 404 and a bad purpose (400); with VECTOR_STORES set, the
// Vector Stores API: three files (text, Markdown, a PDF made here) in a store with attributes
// per file, ingestion polled to completion, searches with and without filters, a bad filter
// (400), an unknown id (404), file content, a deleted file gone from search, the store deleted.
// run_check.py starts the fake upstream and rampart and sets:
//   RAMPART_BASE_URL   http://127.0.0.1:PORT/v1
//   CHAT_MODEL         a model answered by the fake upstream with CHAT_ANSWER
//   EMBEDDING_MODEL    Rampart's local text_embedding model (64 dimensions)
// Prints one line per check; exits 1 on the first failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { APIError, BadRequestError, NotFoundError } from 'openai';

// A one-page PDF showing `text` (Helvetica), with a correct cross-reference table.
function tinyPdf(text) {
  const stream = `BT /F1 18 Tf 72 720 Td (${text}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R ' +
      '/Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let pdf = '%PDF-1.4\n';
  const offsets = [];
  objects.forEach((body, i) => {
    offsets.push(pdf.length);
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) pdf += `${String(offset).padStart(10, '0')} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return pdf;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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

  async 'vector stores: files, ingestion, search, filters, errors, delete'() {
    if (!process.env.VECTOR_STORES) return 'skipped (VECTOR_STORES unset)';
    const vs = client.vectorStores;
    const text = await client.files.create({
      file: new File(['Our refund policy: customers may return any item within thirty days ' +
                      'for a full refund, no questions asked.\n'], 'policy.txt'),
      purpose: 'assistants' });
    const markdown = await client.files.create({
      file: new File(['# Install\n\n## Debian\n\nRun apt-get install rampart, then start the ' +
                      'lighthouse service with systemctl.\n'], 'install.md'),
      purpose: 'assistants' });
    const pdf = await client.files.create({
      file: new File([tinyPdf('Quarterly revenue grew in the aurora region.')], 'report.pdf',
                     { type: 'application/pdf' }),
      purpose: 'assistants' });

    const store = await vs.create({
      name: 'handbook', metadata: { team: 'docs' }, file_ids: [text.id],
      chunking_strategy: { type: 'static',
                           static: { max_chunk_size_tokens: 200, chunk_overlap_tokens: 50 } } });
    check(store.id.startsWith('vs_') && store.object === 'vector_store' &&
          store.name === 'handbook' && store.metadata.team === 'docs' &&
          store.file_counts.total === 1, `created ${JSON.stringify(store)}`);
    const updated = await vs.files.update(store.id, text.id,
                                          { attributes: { department: 'support', year: 2023 } });
    check(updated.attributes.department === 'support' && updated.attributes.year === 2023 &&
          updated.chunking_strategy.static.max_chunk_size_tokens === 200,
          `updated ${JSON.stringify(updated)}`);
    const batch = await vs.fileBatches.create(store.id, {
      file_ids: [markdown.id], attributes: { department: 'engineering' } });
    check(batch.object === 'vector_store.files_batch' && batch.vector_store_id === store.id,
          `batch ${JSON.stringify(batch)}`);
    const added = await vs.files.create(store.id, {
      file_id: pdf.id, attributes: { department: 'finance', year: 2024 } });
    check(added.object === 'vector_store.file' && added.id === pdf.id, JSON.stringify(added));

    // Ingestion runs in the background: poll the list until every file is done.
    const deadline = Date.now() + 60000;
    let files = [];
    for (;;) {
      files = [];
      for await (const file of vs.files.list(store.id)) files.push(file);
      if (files.length === 3 && files.every((file) => file.status !== 'in_progress')) break;
      check(Date.now() < deadline, `still ingesting: ${JSON.stringify(files)}`);
      await sleep(200);
    }
    check(files.every((file) => file.status === 'completed' && file.last_error === null),
          `statuses ${JSON.stringify(files.map((f) => [f.id, f.status, f.last_error]))}`);
    const done = await vs.retrieve(store.id);
    check(done.status === 'completed' && done.file_counts.completed === 3 &&
          done.usage_bytes > 0, `store ${JSON.stringify(done)}`);
    check((await vs.fileBatches.retrieve(store.id, batch.id)).status === 'completed',
          'the batch completed');

    const search = async (body) => (await vs.search(store.id, body)).data;
    const refund = await search({ query: 'refund policy', max_num_results: 5 });
    check(refund.length > 0 && refund[0].file_id === text.id &&
          refund[0].filename === 'policy.txt' && refund[0].score > 0 && refund[0].score <= 1 &&
          refund[0].attributes.department === 'support' &&
          refund[0].content[0].type === 'text' && refund[0].content[0].text.includes('refund'),
          `refund ${JSON.stringify(refund)}`);
    const revenue = await search({ query: 'quarterly revenue aurora' });
    check(revenue.length > 0 && revenue[0].file_id === pdf.id, `pdf ${JSON.stringify(revenue)}`);
    const finance = await search({
      query: ['revenue', 'refund'], max_num_results: 10,
      filters: { type: 'and', filters: [{ type: 'eq', key: 'department', value: 'finance' },
                                        { type: 'gte', key: 'year', value: 2024 }] } });
    check(finance.length > 0 && finance.every((hit) => hit.file_id === pdf.id),
          `filtered ${JSON.stringify(finance)}`);
    const none = await search({ query: 'refund',
                                filters: { type: 'eq', key: 'department', value: 'nobody' } });
    check(none.length === 0, `no department ${JSON.stringify(none)}`);
    const content = [];
    for await (const part of vs.files.content(store.id, markdown.id)) content.push(part);
    check(content.length > 0 && content.map((part) => part.text).join(' ').includes('lighthouse'),
          `content ${JSON.stringify(content)}`);

    try {
      await search({ query: 'refund', filters: { type: 'eq', key: 'year', value: { from: 1 } } });
      throw new Error('a filter of the wrong type was accepted');
    } catch (error) {
      check(error instanceof BadRequestError && error.param === 'filters.value',
            `raised ${error.constructor.name}: ${error.message} (param ${error.param})`);
    }
    for (const missing of [() => vs.retrieve('vs_nosuchstore'),
                           () => vs.files.retrieve(store.id, 'file-nosuchfile'),
                           () => vs.search('vs_nosuchstore', { query: 'refund' })]) {
      try {
        await missing();
        throw new Error('an unknown id was answered');
      } catch (error) {
        check(error instanceof NotFoundError, `raised ${error.constructor.name}: ${error.message}`);
      }
    }

    const removed = await vs.files.del(store.id, text.id);
    check(removed.deleted === true && removed.object === 'vector_store.file.deleted',
          JSON.stringify(removed));
    const after = await search({ query: 'refund policy', max_num_results: 10 });
    check(after.every((hit) => hit.file_id !== text.id), `after delete ${JSON.stringify(after)}`);
    const gone = await vs.del(store.id);
    check(gone.deleted === true && gone.object === 'vector_store.deleted', JSON.stringify(gone));
    for (const file of [text, markdown, pdf]) await client.files.del(file.id);
    return `${store.id}: ${refund.length} hits for "refund policy", filtered ${finance.length}`;
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
