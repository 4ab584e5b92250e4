import fs from 'node:fs';
import path from 'node:path';
import { type ServingProperties, parseServingProperties, servingPropertiesFrom } from '@kiln/core';

/** serving.properties of a fixture folder, or defaults when it has none. */
export function readFixtureProperties(dir: string): ServingProperties {
  const file = path.join(dir, 'serving.properties');
  return fs.existsSync(file)
    ? parseServingProperties(fs.readFileSync(file, 'utf8'))
    : servingPropertiesFrom({});
}
