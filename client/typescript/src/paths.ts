/** threadPath is the HTTP path of thread id, escaped. */
export function threadPath(id: string): string {
  if (!id) throw new Error("empty thread id");
  return `/v1/threads/${encodeURIComponent(id)}`;
}
