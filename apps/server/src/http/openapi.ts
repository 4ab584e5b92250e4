/** OpenAPI 3.1 description of Kiln's routes, served at GET /openapi.json on each listener. */
const errorBody = { $ref: '#/components/schemas/Error' };
const json = (schema: object) => ({ content: { 'application/json': { schema } } });
const model = { name: 'model', in: 'path', required: true, schema: { type: 'string' } };
const version = { name: 'version', in: 'path', required: true, schema: { type: 'string' } };
const query = (name: string, type: string, description: string) => ({
  name,
  in: 'query',
  required: false,
  schema: { type },
  description,
});
const errors = {
  '400': { description: 'Invalid input', ...json(errorBody) },
  '404': { description: 'Unknown model', ...json(errorBody) },
  '413': { description: 'Body over max_request_size', ...json(errorBody) },
  '503': { description: 'Overloaded or not ready (Retry-After)', ...json(errorBody) },
  '500': { description: 'Model or server failure', ...json(errorBody) },
};
const predictBody = {
  description:
    'Raw body (npy, npz, safetensors, DJL ndlist, JSON, JPEG/PNG) or multipart/form-data',
  content: {
    'application/octet-stream': {},
    'application/json': {},
    'multipart/form-data': {},
    'image/jpeg': {},
    'image/png': {},
  },
};
const predictReply = {
  '200': {
    description:
      'JSON for translators that answer JSON; tensors in the format Accept asks for (tensor/npz, tensor/npy, tensor/safetensors, application/json; default DJL ndlist)',
  },
  ...errors,
};
const v2Infer = {
  summary: 'v2 inference (JSON, or the binary-data extension with Inference-Header-Content-Length)',
  requestBody: json({ $ref: '#/components/schemas/V2InferRequest' }),
  responses: { '200': { description: 'v2 inference response' }, ...errors },
};
const v2Meta = {
  summary: 'Model metadata',
  responses: { '200': { description: 'name, versions, platform, inputs, outputs' }, ...errors },
};
const v2Ready = {
  summary: 'Model readiness (status code is the answer)',
  responses: { '200': { description: 'ready' }, '503': { description: 'not ready' } },
};

/** The repository extension: the management key as bearer token. */
const v2Repository = {
  security: [{ managementKey: [] }],
  responses: {
    '200': { description: '{name, state}' },
    '401': { description: 'No valid management key', ...json(errorBody) },
    '403': { description: 'Host or Origin not accepted', ...json(errorBody) },
    ...errors,
  },
};

export function inferenceOpenApi(serverVersion: string): object {
  return {
    openapi: '3.1.0',
    info: { title: 'Kiln inference API', version: serverVersion },
    paths: {
      '/ping': {
        get: {
          summary: 'Health of every model',
          responses: {
            '200': { description: 'all healthy' },
            '500': { description: 'a model FAILED' },
            '503': { description: 'a model is loading or unhealthy' },
          },
        },
      },
      '/predictions/{model}': {
        post: {
          summary: 'Predict with the default version',
          parameters: [model],
          requestBody: predictBody,
          responses: predictReply,
        },
      },
      '/predictions/{model}/{version}': {
        post: {
          summary: 'Predict with a version',
          parameters: [model, version],
          requestBody: predictBody,
          responses: predictReply,
        },
      },
      '/invocations': {
        post: {
          summary: 'SageMaker-style predict',
          parameters: [query('model_name', 'string', 'needed when several models are served')],
          requestBody: predictBody,
          responses: predictReply,
        },
      },
      '/v2': {
        get: {
          summary: 'Server metadata',
          responses: { '200': { description: 'name, version, extensions' } },
        },
      },
      '/v2/health/live': {
        get: { summary: 'Liveness', responses: { '200': { description: 'live' } } },
      },
      '/v2/health/ready': {
        get: {
          summary: 'Readiness of the server and all its models',
          responses: { '200': { description: 'ready' }, '503': { description: 'not ready' } },
        },
      },
      '/v2/models/{model}': { get: { ...v2Meta, parameters: [model] } },
      '/v2/models/{model}/versions/{version}': { get: { ...v2Meta, parameters: [model, version] } },
      '/v2/models/{model}/ready': { get: { ...v2Ready, parameters: [model] } },
      '/v2/models/{model}/versions/{version}/ready': {
        get: { ...v2Ready, parameters: [model, version] },
      },
      '/v2/models/{model}/infer': { post: { ...v2Infer, parameters: [model] } },
      '/v2/models/{model}/versions/{version}/infer': {
        post: { ...v2Infer, parameters: [model, version] },
      },
      '/v2/repository/index': {
        post: {
          ...v2Repository,
          summary: 'Models served and those the model store holds, with their state',
          responses: { '200': { description: '[{name, version, state, reason}]' }, ...errors },
        },
      },
      '/v2/repository/models/{model}/load': {
        post: {
          ...v2Repository,
          summary:
            'Load (or reload) a model from the model store; parameters: engine, batch_size, max_batch_delay, min_worker, max_worker, job_queue_size',
          parameters: [model],
        },
      },
      '/v2/repository/models/{model}/unload': {
        post: { ...v2Repository, summary: 'Unload every version of a model', parameters: [model] },
      },
    },
    components: {
      securitySchemes: { managementKey: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: {
          type: 'object',
          description: 'DJL style {code, type, message}; v2 routes answer {error}',
        },
        V2InferRequest: {
          type: 'object',
          required: ['inputs'],
          properties: {
            id: { type: 'string' },
            parameters: { type: 'object', properties: { binary_data_output: { type: 'boolean' } } },
            inputs: {
              type: 'array',
              items: {
                type: 'object',
                required: ['name', 'shape', 'datatype'],
                properties: {
                  name: { type: 'string' },
                  shape: { type: 'array', items: { type: 'integer' } },
                  datatype: { type: 'string' },
                  data: {},
                  parameters: {
                    type: 'object',
                    properties: { binary_data_size: { type: 'integer' } },
                  },
                },
              },
            },
            outputs: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  name: { type: 'string' },
                  parameters: { type: 'object', properties: { binary_data: { type: 'boolean' } } },
                },
              },
            },
          },
        },
      },
    },
  };
}

export function managementOpenApi(serverVersion: string): object {
  const registerParams = [
    {
      name: 'url',
      in: 'query',
      required: true,
      schema: { type: 'string' },
      description: 'DJL model URL; must lie in the model store or match allowed_urls',
    },
    query('model_name', 'string', 'name (default: from the URL or the folder)'),
    query('model_version', 'string', 'version'),
    query('engine', 'string', 'OnnxRuntime, PyTorch, TensorFlow, DLR'),
    query('batch_size', 'integer', 'jobs per execution'),
    query('max_batch_delay', 'integer', 'ms to wait for a batch to fill'),
    query('min_worker', 'integer', 'minimum workers'),
    query('max_worker', 'integer', 'maximum workers'),
    query('job_queue_size', 'integer', 'queued jobs at most'),
    query('synchronous', 'boolean', 'answer once loaded (default true)'),
  ];
  const scaleParams = [
    query('min_worker', 'integer', 'minimum workers'),
    query('max_worker', 'integer', 'maximum workers'),
    query('synchronous', 'boolean', 'answer once scaled'),
  ];
  const ok = {
    '200': { description: 'done' },
    '202': { description: 'accepted' },
    ...errors,
    '401': { description: 'missing or wrong bearer token' },
    '403': { description: 'URL not allowed' },
  };
  return {
    openapi: '3.1.0',
    info: { title: 'Kiln management API', version: serverVersion },
    paths: {
      '/models': {
        get: {
          summary: 'List models',
          parameters: [
            query('limit', 'integer', 'page size (100)'),
            query('next_page_token', 'string', 'from the previous page'),
          ],
          responses: ok,
        },
        post: { summary: 'Register a model', parameters: registerParams, responses: ok },
      },
      '/models/{model}': {
        get: { summary: 'Describe every version', parameters: [model], responses: ok },
        put: { summary: 'Scale workers', parameters: [model, ...scaleParams], responses: ok },
        delete: { summary: 'Unregister every version', parameters: [model], responses: ok },
      },
      '/models/{model}/{version}': {
        get: { summary: 'Describe a version', parameters: [model, version], responses: ok },
        put: {
          summary: 'Scale a version',
          parameters: [model, version, ...scaleParams],
          responses: ok,
        },
        delete: { summary: 'Unregister a version', parameters: [model, version], responses: ok },
      },
      '/models/{model}/{version}/set-default': {
        put: { summary: 'Make a version the default', parameters: [model, version], responses: ok },
      },
    },
  };
}
