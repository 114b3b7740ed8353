/**
 * Whether `pid` names a running process of ours (one this process may signal).
 * A pid kept in a lock or pid file may since have been reused by another user's
 * process (EPERM): that one holds nothing of ours, so it counts as gone.
 */
export function isOurProcessRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
