-- The actions a person takes on this resource from Argo CD: restore a drift (the annotation
-- nauthera.io/restore, as kubectl nauthera restore sets it) and, for an OIDCClient, approve the
-- generation a ClientPolicy holds (the ClientApproval kubectl nauthera approve creates).
local actions = {}
local reason = nil
if obj.status ~= nil and obj.status.observedGeneration == obj.metadata.generation then
  reason = obj.status.reason
end
local requested = obj.metadata.annotations ~= nil
    and obj.metadata.annotations["nauthera.io/restore"] == "true"
actions["restore"] = { disabled = reason ~= "Drifted" or requested }
if obj.kind == "OIDCClient" then
  -- kubectl nauthera approve names an approval <client>-<generation> when that fits in an
  -- object name (253 characters), else with a digest this environment cannot compute.
  local name = obj.metadata.name .. "-" .. tostring(obj.metadata.generation)
  actions["approve"] = { disabled = reason ~= "WaitingForApproval" or #name > 253 }
end
return actions
