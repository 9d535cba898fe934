-- The health of a nauthera.io resource, from the conditions its reconciler writes (the same for
-- every kind): Stalled=True needs a person (Suspended when the person decides with an action of
-- this resource, approve, restore or adopt; Degraded when something must be fixed),
-- Reconciling=True comes by itself (Progressing), Ready=True is in force (Healthy). An object
-- only observed (Ready=False, reason Observed) is Suspended: settled, but not managed. A
-- generation the reconciler has not judged yet (status.observedGeneration behind
-- metadata.generation) is Progressing.
-- Written for Argo CD's Lua environment from argocd-cm: base and table libraries only.
local function said(condition)
  if condition.message == nil or condition.message == "" then
    return condition.reason
  end
  return condition.reason .. ": " .. condition.message
end

local health = { status = "Progressing", message = "waiting for the reconciler" }
local generation = obj.metadata.generation
if obj.status == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration ~= generation then
  health.message = "waiting for the reconciler to judge generation " .. tostring(generation)
  return health
end
local conditions = {}
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    conditions[condition.type] = condition
  end
end
local decisions = { Drifted = true, WaitingForApproval = true, AdoptionRequired = true }
local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  if decisions[stalled.reason] then
    health.status = "Suspended"
  else
    health.status = "Degraded"
  end
  health.message = said(stalled)
  return health
end
local reconciling = conditions["Reconciling"]
if reconciling ~= nil and reconciling.status == "True" then
  health.message = said(reconciling)
  return health
end
local ready = conditions["Ready"]
if ready ~= nil then
  if ready.reason == "Observed" then
    health.status = "Suspended"
  elseif ready.status == "True" then
    health.status = "Healthy"
  end
  health.message = said(ready)
end
return health
