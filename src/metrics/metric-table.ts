import type { Metric } from 'prom-client';

/** One label of a table metric and every value it can take, in a fixed order. */
export interface TableLabel {
  name: string;
  values: readonly string[];
}

interface Sample {
  metricName: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A counter or histogram whose labels are closed lists, kept as plain numbers in one typed array:
 * counting is an index computation and an increment, with no string, object or promise per
 * request (prom-client's own metrics hash their labels into a new string on every call). The
 * samples are built only when Prometheus scrapes, through the shape prom-client's registry reads
 * from any metric: `name`, `help`, `type` and `get()`.
 */
abstract class MetricTable {
  readonly name: string;
  readonly help: string;
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum' as const;
  protected readonly labels: readonly TableLabel[];
  /** How far apart consecutive values of each label lie in the flat slot numbering. */
  readonly #strides: number[];
  protected readonly slots: number;
  /** Slots that never counted are still shown (as 0) when true: alerts see the series at once. */
  readonly #showZeros: boolean;

  constructor(options: { name: string; help: string; labels: TableLabel[]; showZeros?: boolean }) {
    this.name = options.name;
    this.help = options.help;
    this.labels = options.labels;
    this.#showZeros = options.showZeros ?? false;
    this.#strides = [];
    let slots = 1;
    for (let i = options.labels.length - 1; i >= 0; i--) {
      this.#strides[i] = slots;
      slots *= options.labels[i]!.values.length;
    }
    this.slots = slots;
  }

  /** The slot of one combination of label values, each given by its position in its list. */
  slot(a = 0, b = 0, c = 0, d = 0): number {
    const s = this.#strides;
    return a * (s[0] ?? 0) + b * (s[1] ?? 0) + c * (s[2] ?? 0) + d * (s[3] ?? 0);
  }

  protected labelsOf(slot: number): Record<string, string> {
    const labels: Record<string, string> = {};
    let rest = slot;
    for (let i = 0; i < this.labels.length; i++) {
      const stride = this.#strides[i]!;
      const label = this.labels[i]!;
      labels[label.name] = label.values[Math.floor(rest / stride)]!;
      rest %= stride;
    }
    return labels;
  }

  protected shows(count: number): boolean {
    return count > 0 || this.#showZeros;
  }

  protected abstract samples(): Sample[];

  get(): Promise<{
    name: string;
    help: string;
    type: 'counter' | 'histogram';
    aggregator: 'sum';
    values: Sample[];
  }> {
    const { name, help, type, aggregator } = this;
    return Promise.resolve({ name, help, type, aggregator, values: this.samples() });
  }

  /** For `registry.registerMetric`, whose type names prom-client's own classes only. */
  asPromMetric(): Metric {
    return this as unknown as Metric;
  }
}

export class CounterTable extends MetricTable {
  readonly type = 'counter' as const;
  readonly #counts: Float64Array;

  constructor(options: { name: string; help: string; labels: TableLabel[]; showZeros?: boolean }) {
    super(options);
    this.#counts = new Float64Array(this.slots);
  }

  inc(slot: number, by = 1): void {
    this.#counts[slot]! += by;
  }

  protected samples(): Sample[] {
    const samples: Sample[] = [];
    for (let slot = 0; slot < this.slots; slot++) {
      const value = this.#counts[slot]!;
      if (this.shows(value))
        samples.push({ metricName: this.name, labels: this.labelsOf(slot), value });
    }
    return samples;
  }
}

export class HistogramTable extends MetricTable {
  readonly type = 'histogram' as const;
  /** Upper bounds in seconds, ascending; `+Inf` is implied. */
  readonly #bounds: Float64Array;
  /** Per slot, one count per bound plus one for `+Inf` (not cumulative until exported). */
  readonly #buckets: Float64Array;
  readonly #sums: Float64Array;

  constructor(options: {
    name: string;
    help: string;
    labels: TableLabel[];
    buckets: readonly number[];
  }) {
    super(options);
    this.#bounds = Float64Array.from(options.buckets);
    this.#buckets = new Float64Array(this.slots * (this.#bounds.length + 1));
    this.#sums = new Float64Array(this.slots);
  }

  observe(slot: number, value: number): void {
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.#buckets[slot * (bounds.length + 1) + i]!++;
    this.#sums[slot]! += value;
  }

  protected samples(): Sample[] {
    const samples: Sample[] = [];
    const width = this.#bounds.length + 1;
    for (let slot = 0; slot < this.slots; slot++) {
      let cumulative = 0;
      for (let i = 0; i < width; i++) cumulative += this.#buckets[slot * width + i]!;
      if (!this.shows(cumulative)) continue;
      const labels = this.labelsOf(slot);
      cumulative = 0;
      for (let i = 0; i < width; i++) {
        cumulative += this.#buckets[slot * width + i]!;
        const le = i < this.#bounds.length ? String(this.#bounds[i]) : '+Inf';
        samples.push({
          metricName: `${this.name}_bucket`,
          labels: { ...labels, le },
          value: cumulative,
        });
      }
      samples.push({ metricName: `${this.name}_sum`, labels, value: this.#sums[slot]! });
      samples.push({ metricName: `${this.name}_count`, labels, value: cumulative });
    }
    return samples;
  }
}
