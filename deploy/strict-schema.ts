/**
 * A CRD's structural schema with unknown fields refused: the API server drops them silently
 * (pruning) and `kubectl apply --validate=strict` refuses them; a misspelt field should fail
 * here, not vanish in the cluster. Objects that preserve unknown fields stay open.
 */
export function strictSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const node = Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [key, strictSchema(value)]),
  ) as Record<string, unknown>;
  if (
    node.properties !== undefined &&
    node.additionalProperties === undefined &&
    node['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    node.additionalProperties = false;
  }
  return node;
}
