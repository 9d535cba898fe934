-- Approves the generation of this OIDCClient that a ClientPolicy holds: creates the ClientApproval
-- kubectl nauthera approve creates (named <client>-<generation>, with the client's uid, so that it
-- does not carry over to a client created again under the same name).
local generation = obj.metadata.generation
local approval = {
  apiVersion = "nauthera.io/v1alpha1",
  kind = "ClientApproval",
  metadata = {
    name = obj.metadata.name .. "-" .. tostring(generation),
    namespace = obj.metadata.namespace,
  },
  spec = {
    client = obj.metadata.name,
    generation = generation,
    uid = obj.metadata.uid,
  },
}
return { { operation = "create", resource = approval } }
