/**
 * SQL for the moment the data a statement reads is as of, for answers that state their
 * freshness (`aggregateRefresh`, data quality's `generatedAt`). On a primary it is the
 * given clock (`now()` or `statement_timestamp()`). On a streaming replica it is the
 * commit time of the last transaction the replica replayed: every commit up to then is
 * there, and nothing later may be. A replica of an idle primary so understates its
 * freshness (never overstates it); a running Gantry commits every few seconds.
 */
export function dataAsOfSql(clock: 'now()' | 'statement_timestamp()'): string {
  return `(CASE WHEN pg_is_in_recovery() THEN least(coalesce(pg_last_xact_replay_timestamp(), ${clock}), ${clock}) ELSE ${clock} END)`;
}
