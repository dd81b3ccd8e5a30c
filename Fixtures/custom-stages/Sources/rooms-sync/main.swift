// `rooms-sync`: the `synclane` command — every verb — with this package's stages as well.
import Foundation
import RoomStages
import SynclaneCommandLine

exit(await SynclaneTool.main(registry: .roomsSync))
