import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_ENGINE_MODULES } from '@kiln/server';
import { strictSchema } from './strict-schema.js';

const DEPLOY = path.dirname(fileURLToPath(import.meta.url));
const REFERENCE = path.join(DEPLOY, '..', '..', 'shared', 'reference', 'kserve');

type Manifest = { apiVersion?: string; kind?: string; [key: string]: unknown };

/** Every YAML file under deploy/, each document with where it came from. */
function manifests(): { file: string; doc: Manifest }[] {
  const files = fs
    .readdirSync(DEPLOY, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.ya?ml$/.test(f) && !f.includes('node_modules'))
    .sort();
  return files.flatMap((file) =>
    parseAllDocuments(fs.readFileSync(path.join(DEPLOY, file), 'utf8')).map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
      return { file, doc: d.toJS() as Manifest };
    }),
  );
}

/** Kubernetes kinds, checked against the API's own schemas by kubernetes-models. */
const KUBERNETES: Record<string, (doc: Manifest) => void> = {
  'apps/v1/Deployment': (doc) => new Deployment(doc as never).validate(),
  'v1/Service': (doc) => new Service(doc as never).validate(),
  'policy/v1/PodDisruptionBudget': (doc) => new PodDisruptionBudget(doc as never).validate(),
  'autoscaling/v2/HorizontalPodAutoscaler': (doc) =>
    new HorizontalPodAutoscaler(doc as never).validate(),
  'keda.sh/v1alpha1/ScaledObject': (doc) => new ScaledObject(doc as never).validate(),
};

const KSERVE_CRDS: Record<string, { file: string; version: string }> = {
  'serving.kserve.io/v1alpha1/ServingRuntime': {
    file: 'serving.kserve.io_servingruntimes.yaml',
    version: 'v1alpha1',
  },
  // KServe's ClusterServingRuntime has the ServingRuntime's schema (one Go type, two scopes).
  'serving.kserve.io/v1alpha1/ClusterServingRuntime': {
    file: 'serving.kserve.io_servingruntimes.yaml',
    version: 'v1alpha1',
  },
  'serving.kserve.io/v1beta1/InferenceService': {
    file: 'serving.kserve.io_inferenceservices.yaml',
    version: 'v1beta1',
  },
};

const typeOf = (doc: Manifest) => `${doc.apiVersion}/${doc.kind}`;

const crdsPresent = fs.existsSync(REFERENCE);
if (!crdsPresent)
  console.warn(
    `skipping the KServe CRD schema checks: ${REFERENCE} is absent (KServe's CRDs are not in the repository)`,
  );

const validators = new Map<string, ValidateFunction>();
/** A validator for a KServe kind, from its CRD's openAPIV3Schema, unknown fields refused. */
function kserveValidator(type: string): ValidateFunction {
  const cached = validators.get(type);
  if (cached) return cached;
  const { file, version } = KSERVE_CRDS[type]!;
  const crd = parseAllDocuments(fs.readFileSync(path.join(REFERENCE, file), 'utf8'))[0]!.toJS() as {
    spec: { versions: { name: string; schema: { openAPIV3Schema: object } }[] };
  };
  const schema = crd.spec.versions.find((v) => v.name === version)!.schema.openAPIV3Schema;
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  const validate = ajv.compile(strictSchema(schema) as object);
  validators.set(type, validate);
  return validate;
}

function kserveErrors(doc: Manifest): string[] {
  const validate = kserveValidator(typeOf(doc));
  return validate(doc)
    ? []
    : (validate.errors ?? []).map(
        (e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`,
      );
}

describe('deploy/ manifests', () => {
  const all = manifests();

  it('holds only kinds this test knows how to validate', () => {
    const known = new Set([
      ...Object.keys(KUBERNETES),
      ...Object.keys(KSERVE_CRDS),
      'kustomize.config.k8s.io/v1beta1/Kustomization',
    ]);
    expect(all.length).toBeGreaterThan(10);
    for (const { file, doc } of all)
      expect(known.has(typeOf(doc)), `${file}: ${typeOf(doc)}`).toBe(true);
  });

  it('Kubernetes kinds validate against the Kubernetes API schemas', () => {
    const checked = all.filter(({ doc }) => KUBERNETES[typeOf(doc)]);
    expect(checked.map(({ doc }) => doc.kind).sort()).toEqual([
      'Deployment',
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'ScaledObject',
      'Service',
    ]);
    for (const { file, doc } of checked)
      expect(() => KUBERNETES[typeOf(doc)]!(doc), file).not.toThrow();
  });

  it('a field the API does not know fails validation (the check bites)', () => {
    const deployment = all.find(({ doc }) => doc.kind === 'Deployment')!.doc;
    const spec = deployment.spec as { replicas: unknown };
    expect(() =>
      KUBERNETES['apps/v1/Deployment']!({ ...deployment, spec: { ...spec, replicas: 'two' } }),
    ).toThrow();
  });

  it.skipIf(!crdsPresent)('KServe kinds validate against the KServe CRD schemas', () => {
    const checked = all.filter(({ doc }) => KSERVE_CRDS[typeOf(doc)]);
    expect(new Set(checked.map(({ doc }) => doc.kind))).toEqual(
      new Set(['ServingRuntime', 'ClusterServingRuntime', 'InferenceService']),
    );
    for (const { file, doc } of checked) expect(kserveErrors(doc), file).toEqual([]);
  });

  it.skipIf(!crdsPresent)('a misspelt or mistyped KServe field fails validation', () => {
    const runtime = all.find(({ doc }) => doc.kind === 'ServingRuntime')!.doc;
    const spec = runtime.spec as Record<string, unknown>;
    expect(kserveErrors({ ...runtime, spec: { ...spec, protocolVersion: ['v2'] } })).not.toEqual(
      [],
    );
    expect(
      kserveErrors({ ...runtime, spec: { ...spec, supportedModelFormats: [{ version: '1' }] } }),
    ).not.toEqual([]);
  });

  it('kustomizations name files that exist', () => {
    for (const { file, doc } of all.filter(({ doc }) => doc.kind === 'Kustomization')) {
      for (const resource of (doc.resources as string[]) ?? [])
        expect(
          fs.existsSync(path.join(DEPLOY, path.dirname(file), resource)),
          `${file}: ${resource}`,
        ).toBe(true);
    }
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
  if (!kubectl) console.warn('skipping the kustomize build check: kubectl is not installed');
  it.skipIf(!kubectl)('every kustomization builds, and what it builds validates', () => {
    const dirs = all
      .filter(({ doc }) => doc.kind === 'Kustomization')
      .map(({ file }) => path.join(DEPLOY, path.dirname(file)));
    for (const dir of dirs) {
      const built = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
      expect(built.status, built.stderr).toBe(0);
      const docs = parseAllDocuments(built.stdout).map((d) => d.toJS() as Manifest);
      for (const doc of docs) expect(() => KUBERNETES[typeOf(doc)]!(doc), dir).not.toThrow();
      // The common label reaches the selectors, so Service, PDB and Deployment match one set.
      const deployment = docs.find((d) => d.kind === 'Deployment') as {
        spec: { selector: { matchLabels: Record<string, string> } };
      };
      expect(deployment.spec.selector.matchLabels['app.kubernetes.io/name']).toBe('kiln');
    }
  });
});

/** KServe model format → the Kiln engine that serves it. */
const FORMAT_ENGINES: Record<string, string> = {
  onnx: 'OnnxRuntime',
  pytorch: 'PyTorch',
  tfjs: 'TensorFlow',
  python: 'Python',
};
/** Engines Kiln has that its image cannot serve, with why. */
const NOT_IN_IMAGE: Record<string, string> = {
  DLR: 'no DLR runtime is obtainable here (not in Debian, not on npm), so the image has none',
  Python: 'the image carries no Python interpreter with numpy yet, so it cannot run model.py',
};

describe('the Kiln serving runtime', () => {
  it("declares one model format per engine of Kiln's image, and the v2 protocols", async () => {
    const engines: string[] = [];
    for (const specifier of DEFAULT_ENGINE_MODULES) {
      const module = (await import(specifier)) as { provider: { name: string } };
      engines.push(module.provider.name);
    }
    for (const [engine, why] of Object.entries(NOT_IN_IMAGE))
      console.warn(`the runtime declares no format for ${engine}: ${why}`);
    const served = engines.filter((e) => !(e in NOT_IN_IMAGE)).sort();
    for (const { file, doc } of manifests().filter(({ doc }) =>
      ['ServingRuntime', 'ClusterServingRuntime'].includes(doc.kind ?? ''),
    )) {
      const spec = doc.spec as {
        supportedModelFormats: { name: string }[];
        protocolVersions: string[];
      };
      const formats = spec.supportedModelFormats.map((f) => f.name);
      expect(formats.map((f) => FORMAT_ENGINES[f] ?? `unknown format ${f}`).sort(), file).toEqual(
        served,
      );
      expect(spec.protocolVersions, file).toEqual(['v2', 'grpc-v2']);
    }
  });
});
