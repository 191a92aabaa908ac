'use strict';

/**
 * Formatting helpers shared by the build-dashboard widgets.
 */

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const STATUS_LABELS = {
  queued: 'Queued',
  running: 'Running',
  passed: 'Passed',
  failed: 'Failed',
  cancelled: 'Cancelled',
};

/**
 * Pad a number with leading zeros to the given width.
 */
function pad(value, width = 2) {
  return String(value).padStart(width, '0');
}

/**
 * Format a duration in seconds as "1h 02m 03s", dropping leading zero units.
 */
function formatDuration(totalSeconds) {
  if (!Number.isFinite(totalSeconds) || totalSeconds < 0) {
    return '—';
  }
  const seconds = Math.round(totalSeconds);
  const days = Math.floor(seconds / DAY);
  const hours = Math.floor((seconds % DAY) / HOUR);
  const minutes = Math.floor((seconds % HOUR) / MINUTE);
  const secs = seconds % MINUTE;
  if (days > 0) {
    return `${days}d ${pad(hours)}h`;
  }
  if (hours > 0) {
    return `${hours}h ${pad(minutes)}m ${pad(secs)}s`;
  }
  if (minutes > 0) {
    return `${minutes}m ${pad(secs)}s`;
  }
  return `${secs}s`;
}

/**
 * Describe how long ago a timestamp was, relative to `now` (milliseconds).
 */
function timeAgo(timestamp, now = Date.now()) {
  const diff = Math.floor((now - new Date(timestamp).getTime()) / 1000);
  if (diff < 0) {
    return 'in the future';
  }
  if (diff < 45) {
    return 'just now';
  }
  if (diff < HOUR) {
    const minutes = Math.max(1, Math.round(diff / MINUTE));
    return `${minutes} min ago`;
  }
  if (diff < DAY) {
    const hours = Math.round(diff / HOUR);
    return `${hours} h ago`;
  }
  const days = Math.round(diff / DAY);
  return days === 1 ? 'yesterday' : `${days} days ago`;
}

/**
 * Format a ratio between 0 and 1 as a percentage string.
 */
function formatPercent(ratio, decimals = 1) {
  if (ratio === null || ratio === undefined || Number.isNaN(ratio)) {
    return 'n/a';
  }
  return `${(ratio * 100).toFixed(decimals)}%`;
}

/**
 * Return the display label and CSS class for a build status.
 */
function statusBadge(status) {
  const key = String(status || '').toLowerCase();
  const known = Object.prototype.hasOwnProperty.call(STATUS_LABELS, key);
  return {
    label: known ? STATUS_LABELS[key] : 'Unknown',
    className: `badge badge--${known ? key : 'unknown'}`,
  };
}

/**
 * Shorten a commit SHA for display.
 */
function shortSha(sha, length = 7) {
  return typeof sha === 'string' ? sha.slice(0, length) : '';
}

/**
 * Summarise a list of builds as "12 passed, 2 failed, 1 running".
 */
function summarizeBuilds(builds) {
  const counts = {};
  for (const build of builds) {
    const key = String(build.status || 'unknown').toLowerCase();
    counts[key] = (counts[key] || 0) + 1;
  }
  return Object.keys(STATUS_LABELS)
    .filter((key) => counts[key])
    .map((key) => `${counts[key]} ${key}`)
    .join(', ');
}

module.exports = {
  formatDuration,
  timeAgo,
  formatPercent,
  statusBadge,
  shortSha,
  summarizeBuilds,
};
