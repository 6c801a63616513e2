-- wrk script: HTTP/1.1 pipelining, 16 requests per write.
--
--   wrk --latency -t4 -c128 -d10s -s bench/pipeline.lua http://127.0.0.1:9000/
--   bench/run --script bench/pipeline.lua
--
-- Each write carries 16 GET requests for the URL's path (/ unless the URL says
-- otherwise); the server must answer them in order. wrk counts every response,
-- so Requests/sec is responses per second. An optional script argument changes
-- the depth: `wrk ... -s bench/pipeline.lua URL -- 32`.

local depth = 16
local batch

init = function(args)
  depth = tonumber(args[1]) or depth
  -- Built once per wrk thread: wrk.format with nils uses the method, path and
  -- headers from wrk's command line, so Host is set correctly.
  batch = string.rep(wrk.format(nil, nil), depth)
end

request = function()
  return batch
end
