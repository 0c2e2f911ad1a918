// Rampart's Pinecone API through the official Node client (@pinecone-database/pinecone 9.0.0):
// the control plane (create in both of the client's shapes, describe, list, delete) and every
// data-plane call (upsert, query by vector and by id with a filter, fetch, update, list with a
// prefix and pages, describe_index_stats with and without a filter, delete by ids, by filter and
// all of a namespace), and the client's error classes for 400, 404 and 409.
// run_check.py starts rampart and sets RAMPART_PINECONE_URL (http://127.0.0.1:PORT/pinecone).
// Prints one line per check; exits 1 on the first failure.
import pkg from '@pinecone-database/pinecone';

const { Pinecone, Errors } = pkg;
const controllerHostUrl = process.env.RAMPART_PINECONE_URL;
const pc = new Pinecone({ apiKey: 'unused', controllerHostUrl, maxRetries: 0 });
const name = 'compat';
const dimension = 4;

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function expectError(errorClass, call) {
  try {
    await call();
  } catch (error) {
    check(error instanceof errorClass,
      `expected ${errorClass.name}, got ${error?.name}: ${error?.message}`);
    return error.name;
  }
  throw new Error(`expected ${errorClass.name}, the call succeeded`);
}

const sorted = (ids) => [...ids].sort();
let index;

const records = [
  { id: 'doc-1', values: [1, 0, 0, 0], metadata: { genre: 'drama', year: 2020, tags: ['a', 'b'] } },
  { id: 'doc-2', values: [0.9, 0.1, 0, 0], metadata: { genre: 'comedy', year: 2019 } },
  { id: 'doc-3', values: [0, 1, 0, 0], metadata: { genre: 'drama', year: 2001 } },
  { id: 'note-1', values: [0, 0, 1, 0], metadata: { genre: 'news', year: 2024 } },
];

const checks = {
  async 'create an index (the older shape: dimension, metric, spec)'() {
    const created = await pc.createIndex({
      name, dimension, metric: 'cosine',
      spec: { serverless: { cloud: 'aws', region: 'us-east-1' } },
    });
    check(created.name === name, `name ${created.name}`);
    check(created.dimension === dimension, `dimension ${created.dimension}`);
    check(created.metric === 'cosine', `metric ${created.metric}`);
    return created.host;
  },

  async 'create an index (this API version\'s shape: schema and deployment)'() {
    const created = await pc.indexes.create({
      name: 'compat-dot',
      schema: { fields: { _values: { type: 'dense_vector', dimension: 2, metric: 'dotproduct' } } },
      deployment: { deploymentType: 'managed', cloud: 'aws', region: 'us-east-1' },
    });
    check(created.name === 'compat-dot', `name ${created.name}`);
    return `${created.schema.fields._values.metric}`;
  },

  async 'a second create of the same name is a PineconeConflictError (409)'() {
    return expectError(Errors.PineconeConflictError, () => pc.createIndex({
      name, dimension, metric: 'cosine', spec: { serverless: { cloud: 'aws', region: 'r' } },
    }));
  },

  async 'describe and list'() {
    const described = await pc.describeIndex(name);
    check(described.host.endsWith(`/pinecone/indexes/${name}`), `host ${described.host}`);
    check(described.status.ready === true, `status ${JSON.stringify(described.status)}`);
    const listed = await pc.listIndexes();
    const names = sorted(listed.indexes.map((entry) => entry.name));
    check(JSON.stringify(names) === JSON.stringify(['compat', 'compat-dot']), `names ${names}`);
    index = pc.index({ name, host: described.host });
    return described.host;
  },

  async 'an unknown index is a PineconeNotFoundError (404)'() {
    return expectError(Errors.PineconeNotFoundError, () => pc.describeIndex('no-such-index'));
  },

  async upsert() {
    await index.upsert({ records });
    await index.namespace('other').upsert({ records: [{ id: 'x', values: [0, 0, 0, 1] }] });
    return `${records.length} + 1 records`;
  },

  async 'a wrong dimension is a PineconeBadRequestError (400)'() {
    return expectError(Errors.PineconeBadRequestError,
      () => index.upsert({ records: [{ id: 'bad', values: [1, 2] }] }));
  },

  async 'an unknown filter operator is a PineconeBadRequestError (400)'() {
    return expectError(Errors.PineconeBadRequestError, () => index.query({
      topK: 1, vector: [1, 0, 0, 0], filter: { genre: { $regex: 'd.*' } },
    }));
  },

  async 'query by vector with a filter'() {
    const answer = await index.query({
      topK: 2, vector: [1, 0, 0, 0], filter: { genre: { $eq: 'drama' } }, includeMetadata: true,
    });
    const ids = answer.matches.map((match) => match.id);
    check(JSON.stringify(ids) === '["doc-1","doc-3"]', `ids ${ids}`);
    check(answer.matches[0].metadata.year === 2020, `metadata ${JSON.stringify(answer.matches[0])}`);
    check(Math.abs(answer.matches[0].score - 1) < 1e-5, `score ${answer.matches[0].score}`);
    return ids.join(', ');
  },

  async 'query by id, with values, a list field and $or'() {
    const answer = await index.query({
      topK: 3, id: 'doc-1', includeValues: true,
      filter: { $or: [{ tags: { $in: ['b'] } }, { year: { $lt: 2010 } }] },
    });
    const ids = answer.matches.map((match) => match.id);
    check(JSON.stringify(ids) === '["doc-1","doc-3"]', `ids ${ids}`);
    check(answer.matches[0].values.length === dimension, 'values');
    return ids.join(', ');
  },

  async fetch() {
    const answer = await index.fetch({ ids: ['doc-2', 'missing'] });
    const ids = Object.keys(answer.records);
    check(JSON.stringify(ids) === '["doc-2"]', `ids ${ids}`);
    check(answer.records['doc-2'].metadata.genre === 'comedy', 'metadata');
    return ids.join(', ');
  },

  async 'update merges metadata and replaces values'() {
    await index.update({ id: 'doc-2', metadata: { genre: 'drama' }, values: [0, 0, 0.5, 0.5] });
    const answer = await index.fetch({ ids: ['doc-2'] });
    const record = answer.records['doc-2'];
    check(record.metadata.genre === 'drama' && record.metadata.year === 2019,
      `metadata ${JSON.stringify(record.metadata)}`);
    check(record.values[3] === 0.5, `values ${record.values}`);
    return JSON.stringify(record.metadata);
  },

  async 'list ids by prefix, in pages'() {
    const first = await index.listPaginated({ prefix: 'doc-', limit: 2 });
    const ids = first.vectors.map((entry) => entry.id);
    check(JSON.stringify(ids) === '["doc-1","doc-2"]', `first page ${ids}`);
    check(first.pagination?.next, 'a next page');
    const second = await index.listPaginated({
      prefix: 'doc-', limit: 2, paginationToken: first.pagination.next,
    });
    const rest = second.vectors.map((entry) => entry.id);
    check(JSON.stringify(rest) === '["doc-3"]', `second page ${rest}`);
    check(!second.pagination?.next, 'no third page');
    return [...ids, ...rest].join(', ');
  },

  async 'describe_index_stats, whole and filtered'() {
    const stats = await index.describeIndexStats();
    check(stats.totalRecordCount === 5, `total ${JSON.stringify(stats)}`);
    check(stats.namespaces.__default__.recordCount === 4, 'default namespace');
    check(stats.namespaces.other.recordCount === 1, 'other namespace');
    check(stats.dimension === dimension, 'dimension');
    const filtered = await index.describeIndexStats({ filter: { genre: 'drama' } });
    check(filtered.totalRecordCount === 3, `filtered ${JSON.stringify(filtered)}`);
    return `${stats.totalRecordCount} records, ${filtered.totalRecordCount} drama`;
  },

  async 'delete by id, by ids, by filter and all of a namespace'() {
    await index.deleteOne({ id: 'note-1' });
    await index.deleteMany({ ids: ['doc-3'] });
    await index.deleteMany({ filter: { year: { $gte: 2020 } } });
    const left = await index.listPaginated({});
    check(JSON.stringify(left.vectors.map((entry) => entry.id)) === '["doc-2"]',
      `left ${JSON.stringify(left.vectors)}`);
    await index.namespace('other').deleteAll();
    const stats = await index.describeIndexStats();
    check(stats.totalRecordCount === 1, `total ${JSON.stringify(stats)}`);
    return 'doc-2 left';
  },

  async 'an index that is gone: its data plane is a PineconeNotFoundError'() {
    await pc.deleteIndex('compat-dot');
    const gone = pc.index({ name: 'compat-dot', host: `${controllerHostUrl}/indexes/compat-dot` });
    return expectError(Errors.PineconeNotFoundError,
      () => gone.query({ topK: 1, vector: [1, 0] }));
  },

  async 'delete the index'() {
    await pc.deleteIndex(name);
    const listed = await pc.listIndexes();
    check((listed.indexes ?? []).length === 0, `left ${JSON.stringify(listed)}`);
    return 'no index left';
  },
};

for (const [title, run] of Object.entries(checks)) {
  try {
    const detail = await run();
    console.log(`ok   ${title}${detail ? `: ${detail}` : ''}`);
  } catch (error) {
    console.log(`FAIL ${title}: ${error?.stack ?? error}`);
    process.exit(1);
  }
}
console.log('pinecone-node: every check passed');
