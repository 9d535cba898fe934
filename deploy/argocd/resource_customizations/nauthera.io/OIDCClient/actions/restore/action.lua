-- Restores a drift: the reconciler writes the declared state back over the change on the server,
-- records a Restored event and removes the annotation (kubectl nauthera restore does the same).
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["nauthera.io/restore"] = "true"
return obj
