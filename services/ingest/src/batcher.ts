import pRetry, { AbortError } from 'p-retry';
import type { Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { ingestMetrics, recordOutcomes } from './metrics.ts';
import type { ParsedMessage } from './pipeline/steps.ts';
import { clip, NO_REJECTIONS } from './pipeline/steps.ts';
import { MESSAGE_ID_FACTOR } from './storage/bronze.ts';
import { inTransaction, isDataError } from './storage/transaction.ts';
import { writeBatch, type WriteMethod } from './storage/write-batch.ts';

/** A parsed message and what to do once it is committed (acknowledge it to the broker). */
export interface Delivery {
  message: ParsedMessage;
  settle(): void;
}

export interface BatcherOptions {
  pool: Pool;
  logger: Logger;
  /** Readings (messages without readings count one) per batch. */
  batchSize: number;
  batchMs: number;
  /** Batches committed concurrently (each on its own connection). */
  writers: number;
  method: WriteMethod;
  statementTimeoutMs: number;
  oversizedPayloadBytes: number;
}

/**
 * Collects deliveries into batches (by size or age), commits each batch in one
 * transaction with retries, and settles its deliveries after the commit. Several
 * batches may commit at once; settling order is the consumer's business (it
 * acknowledges in receive order).
 */
export class Batcher {
  private open: Delivery[] = [];
  private openWeight = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly queue: Delivery[][] = [];
  private active = 0;
  private readonly idleWaiters: Array<() => void> = [];
  private readonly abort = new AbortController();
  private readonly log: Logger;

  constructor(private readonly options: BatcherOptions) {
    this.log = options.logger;
  }

  add(delivery: Delivery): void {
    this.open.push(delivery);
    // A batch upload counts by its readings: batchSize bounds rows per transaction, not messages.
    this.openWeight += Math.max(1, delivery.message.readings.length);
    // Bronze numbers a batch's messages below MESSAGE_ID_FACTOR.
    if (this.openWeight >= this.options.batchSize || this.open.length >= MESSAGE_ID_FACTOR - 1) this.seal();
    else if (this.timer === null) this.timer = setTimeout(() => this.seal(), this.options.batchMs);
  }

  /** Closes the open batch and queues it for writing. */
  seal(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.open.length === 0) return;
    this.queue.push(this.open);
    this.open = [];
    this.openWeight = 0;
    this.dispatch();
  }

  /** Deliveries accepted and not yet committed. */
  get pending(): number {
    return this.open.length + this.queue.reduce((sum, batch) => sum + batch.length, 0);
  }

  /** Seals the open batch and waits until everything is committed, or the timeout passes. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.seal();
    if (this.active === 0 && this.queue.length === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true))),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return drained;
  }

  /** Gives up on batches still retrying (their messages stay unacknowledged). */
  abortRetries(): void {
    this.abort.abort();
  }

  private dispatch(): void {
    while (this.active < this.options.writers && this.queue.length > 0) {
      const batch = this.queue.shift()!;
      this.active += 1;
      this.commit(batch)
        .then(
          () => {
            for (const delivery of batch) delivery.settle();
          },
          (error: unknown) => {
            if (!this.abort.signal.aborted) this.log.error({ err: error }, 'batch could not be committed');
          },
        )
        .finally(() => {
          this.active -= 1;
          this.dispatch();
          if (this.active === 0 && this.queue.length === 0) for (const wake of this.idleWaiters.splice(0)) wake();
        });
    }
  }

  /** Commits a batch; outages are retried without end, bad data is split off. */
  private async commit(batch: Delivery[]): Promise<void> {
    const messages = batch.map((delivery) => delivery.message);
    try {
      await this.write(messages);
    } catch (error) {
      if (!isDataError(error)) throw error;
      await this.isolate(messages, error);
    }
  }

  private write(messages: ParsedMessage[]): Promise<void> {
    const { pool, statementTimeoutMs, method, oversizedPayloadBytes } = this.options;
    return pRetry(
      async () => {
        if (this.abort.signal.aborted) throw new AbortError('ingest is stopping');
        const started = performance.now();
        const result = await inTransaction(pool, statementTimeoutMs, (client) =>
          writeBatch(client, messages, { method, oversizedPayloadBytes }),
        );
        ingestMetrics.commitSeconds.observe((performance.now() - started) / 1000);
        recordOutcomes(
          result.outcomes,
          messages.map((message) => message.deviceTs),
          messages.map((message) => message.raw.receivedAt),
        );
      },
      {
        retries: Number.POSITIVE_INFINITY,
        minTimeout: 250,
        maxTimeout: 5000,
        factor: 2,
        signal: this.abort.signal,
        shouldRetry: ({ error }) => !isDataError(error) && !this.abort.signal.aborted,
        onFailedAttempt: ({ error, attemptNumber }) => {
          if (isDataError(error)) return;
          ingestMetrics.commitRetries.inc();
          const fields = {
            err: { message: error.message, code: (error as { code?: string }).code },
            attempt: attemptNumber,
            messages: messages.length,
          };
          if (attemptNumber === 1 || attemptNumber % 10 === 0)
            this.log.warn(fields, 'batch commit failed; retrying (messages stay unacknowledged)');
        },
      },
    );
  }

  /** Splits a batch the database refused until the offending messages are found; they go to bronze as storage_error. */
  private async isolate(messages: ParsedMessage[], error: unknown): Promise<void> {
    if (messages.length > 1) {
      const middle = Math.ceil(messages.length / 2);
      for (const half of [messages.slice(0, middle), messages.slice(middle)]) {
        try {
          await this.write(half);
        } catch (halfError) {
          if (!isDataError(halfError)) throw halfError;
          await this.isolate(half, halfError);
        }
      }
      return;
    }
    const message = messages[0]!;
    const detail = clip(`the database refused the message: ${(error as Error).message}`, 500);
    this.log.warn(
      { topic: message.raw.topic, detail },
      'message refused by the database; kept in bronze as storage_error',
    );
    const refused: ParsedMessage = {
      ...message,
      readings: [],
      entryRejections: NO_REJECTIONS,
      rejection: { reason: 'storage_error', detail },
    };
    try {
      await this.write([refused]);
    } catch (bronzeError) {
      if (!isDataError(bronzeError)) throw bronzeError;
      // Not even the raw bytes fit in bronze: acknowledge rather than block every later message.
      this.log.error({ err: bronzeError, topic: message.raw.topic }, 'message could not be stored at all; dropped');
    }
  }
}
