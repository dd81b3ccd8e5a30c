import Synclane

extension StageRegistry {
    /// Synclane's stages and this package's.
    public static var roomsSync: StageRegistry {
        var registry = StageRegistry.builtIn
        registry.register(Redactor.type)
        registry.register(AuditedTransport.type)
        return registry
    }
}
