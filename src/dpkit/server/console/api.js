// The JSON API with the bearer token the user pasted (kept in sessionStorage: gone when
// the tab closes, never in a cookie, so no other site's page can send it).
const KEY = "dpkit.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
  }
}

function describe(status, body) {
  if (!body || typeof body !== "object") return `HTTP ${status}`;
  let detail = body.detail;
  if (Array.isArray(detail)) {
    detail = detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  }
  return `${body.error || "HTTP " + status} (${status}): ${detail ?? ""}`;
}

/** Call the API: method, path (its variable parts already encoded), optional JSON body. */
export async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${token.get() || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, cache: "no-store", credentials: "omit", redirect: "error",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/** A dataset's route: /v1/datasets/{name}/{rest}. */
export function datasetPath(name, rest) {
  return `/v1/datasets/${encodeURIComponent(name)}/${rest}`;
}
