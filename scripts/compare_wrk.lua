-- wrk script for scripts/compare.py: the raw-HTTP limit. One wrk thread sends
-- every GET request listed in KEYFILE exactly once over C connections, then
-- ends wrk (wrk itself would sleep for the whole -d duration).
-- Usage: wrk -t 1 -c C -d 600s -s compare_wrk.lua http://host:port -- KEYFILE 1
--
-- KEYFILE lines: path <TAB> x-amz-date <TAB> x-amz-content-sha256 <TAB> authorization.
-- The SigV4 signatures are computed before the clock starts (compare.py), so
-- the server checks a real signature and the client does no work per request.

local ffi = require("ffi")
ffi.cdef([[ int kill(int pid, int sig); int getpid(void); ]])

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local reqs = {}
local issued = 0
answered = 0
unexpected = 0

function init(args)
  local n = tonumber(args[2])
  local i = 0
  for line in io.lines(args[1]) do
    if i % n == id then
      local path, date, sha, auth = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)\t(.+)$")
      reqs[#reqs + 1] = wrk.format("GET", path, {
        ["x-amz-date"] = date,
        ["x-amz-content-sha256"] = sha,
        ["Authorization"] = auth,
      })
    end
    i = i + 1
  end
end

function request()
  issued = issued + 1
  return reqs[((issued - 1) % #reqs) + 1]
end

function response(status, headers, body)
  answered = answered + 1
  -- 404: a prefix without a LEASE, as every client sees it.
  if status ~= 200 and status ~= 404 then
    unexpected = unexpected + 1
  end
  if answered == #reqs then
    wrk.thread:stop()
    -- SIGINT: wrk's handler ends its sleep, so the run ends now (one thread).
    ffi.C.kill(ffi.C.getpid(), 2)
  end
end

function done(summary, latency, requests)
  local total, bad = 0, 0
  for _, t in ipairs(threads) do
    total = total + (t:get("answered") or 0)
    bad = bad + (t:get("unexpected") or 0)
  end
  io.write(string.format("wrk-answered %d wrk-unexpected-status %d\n", total, bad))
end
