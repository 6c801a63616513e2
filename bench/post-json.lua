-- wrk script: the typed JSON route, POST /hello/json with a small JSON body.
--
--   wrk --latency -t4 -c128 -d10s -s bench/post-json.lua http://127.0.0.1:9000/hello/json
--   bench/run --routes     (its ours-MODE-json and actix-json rows)
--
-- Every request carries {"name":"World"} as application/json; both servers
-- answer {"message":"Hello, World!"}.

wrk.method = "POST"
wrk.body = '{"name":"World"}'
wrk.headers["Content-Type"] = "application/json"
