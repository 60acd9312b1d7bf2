/** k6/metrics: custom metrics record their samples (tags are not kept). */
import { add } from './runtime.mjs';

class Metric {
  constructor(name) {
    this.name = name;
  }
  add(value) {
    add(this.name, Number(value));
  }
}

export class Trend extends Metric {}
export class Counter extends Metric {}
export class Rate extends Metric {}
export class Gauge extends Metric {}

export default { Trend, Counter, Rate, Gauge };
