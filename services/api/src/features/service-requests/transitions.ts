import { ConflictError, ValidationError } from '../../errors.ts';
import type { ServiceRequestStatus } from './schemas.ts';

/** The status changes an update may make (docs/service-requests.md). Cancelling has its own operation. */
export const allowedTransitions: Record<ServiceRequestStatus, readonly ServiceRequestStatus[]> = {
  new: ['triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed'],
  reopened: ['triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed'],
  triaged: ['in_progress', 'waiting_customer', 'resolved', 'closed'],
  in_progress: ['waiting_customer', 'resolved', 'closed'],
  waiting_customer: ['in_progress', 'resolved', 'closed'],
  resolved: ['closed', 'reopened'],
  closed: ['reopened'],
  cancelled: [],
};

/** Statuses a request may be created in (reopened and cancelled make no sense for a new one). */
export const creatableStatuses: readonly ServiceRequestStatus[] = [
  'new',
  'triaged',
  'in_progress',
  'waiting_customer',
  'resolved',
  'closed',
];

/** Statuses from which the cancel operation is refused. */
export const uncancellableStatuses: readonly ServiceRequestStatus[] = ['resolved', 'closed', 'cancelled'];

export function isResolvingStatus(status: ServiceRequestStatus): boolean {
  return status === 'resolved' || status === 'closed';
}

/** Throws 409 naming the moves that are allowed from `from`. */
export function assertTransitionAllowed(
  displayCode: string,
  from: ServiceRequestStatus,
  to: ServiceRequestStatus,
): void {
  if (to === 'cancelled') {
    throw new ConflictError(
      `service request ${displayCode} cannot be set to cancelled by an update; use POST /service-requests/{id}/cancel with a reason`,
      'invalid_transition',
    );
  }
  const allowed = allowedTransitions[from];
  if (allowed.includes(to)) return;
  const options =
    allowed.length === 0
      ? `${from} is final: no status change is allowed`
      : `allowed from ${from}: ${allowed.join(', ')}`;
  throw new ConflictError(
    `service request ${displayCode} cannot move from ${from} to ${to}; ${options}`,
    'invalid_transition',
  );
}

/**
 * Resolving or closing needs a non-empty resolution and resolutionReviewed true (the
 * spec's rule 1); 400 naming what is missing.
 */
export function assertResolutionGiven(
  status: ServiceRequestStatus,
  resolution: string,
  resolutionReviewed: boolean | undefined,
): void {
  if (resolution.trim() === '') {
    throw new ValidationError(
      `invalid body field resolution: a non-empty resolution is required to set status ${status}`,
      'resolution_required',
    );
  }
  if (resolutionReviewed !== true) {
    throw new ValidationError(
      `invalid body field resolutionReviewed: must be true to set status ${status}`,
      'resolution_not_reviewed',
    );
  }
}
