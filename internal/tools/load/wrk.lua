-- The requests of one phase of the load tool's throughput table, for wrk
-- (see wrk.go). Arguments after "--": op (raise, fact or event), threads,
-- due (raises), plans per thread (events).
--
-- Thread t numbers its requests 1, 2, 3, ...: a raise makes expectation
-- r<t>-<n>, a fact reports paid.r<t>-<n> (the n-th raised by thread t, or
-- one the tool raised in bulk into the same numbering), an event appends
-- ev-<t>-<n> to plan-load-<t + threads * (n mod plans per thread)>, so no
-- two threads write one plan.

local created = {}

function setup(thread)
  thread:set("tid", #created)
  table.insert(created, thread)
end

local op, threads, due, plans
local n = 0
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer load-token" }

function init(args)
  op, threads, due, plans = args[1], tonumber(args[2]), args[3], tonumber(args[4])
end

function request()
  n = n + 1
  -- wrk reads a thread's globals with thread:get; "sent" is what done() reports.
  sent = n
  if op == "raise" then
    local id = "r" .. tid .. "-" .. n
    return wrk.format("POST", "/v1/agents/load/expectations", headers,
      '{"taskId":"t","contextId":"c","expectations":[{"expectationId":"' .. id ..
      '","kind":"payment","subject":{"type":"invoice","id":"' .. id ..
      '"},"expects":"invoice is paid","satisfiedBy":{"factKey":"paid.' .. id ..
      '"},"dueAt":"' .. due .. '","basis":"contract"}]}')
  elseif op == "fact" then
    return wrk.format("POST", "/v1/agents/load/facts", headers,
      '{"facts":[{"factKey":"paid.r' .. tid .. "-" .. n .. '","observedAt":"' ..
      os.date("!%Y-%m-%dT%H:%M:%SZ") .. '"}]}')
  else
    local plan = "plan-load-" .. (tid + threads * (n % plans))
    return wrk.format("POST", "/v1/executions/" .. plan .. "/events", headers,
      '{"event_id":"ev-' .. tid .. "-" .. n .. '","message_type":"TOOL_REQUEST","timestamp":"' ..
      os.date("!%Y-%m-%dT%H:%M:%SZ") .. '","tool":"iam_create_user","arguments":{"n":' .. n .. '}}')
  end
end

function done(summary, latency, requests)
  local sent = {}
  for i, t in ipairs(created) do
    sent[i] = tostring(t:get("sent") or 0)
  end
  local e = summary.errors
  io.write(string.format("CLOCKWORK_WRK %d %d %d %d %d %d %s\n", summary.requests,
    e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency.max, table.concat(sent, ",")))
end
