; Inno Setup script for the Windows installer (per user, no administrator rights):
;   1. pyinstaller --noconfirm packaging\pyinstaller\nneditor.spec   (makes dist\bundle\nneditor)
;   2. iscc /DAppVersion=0.1.0 packaging\windows\nneditor.iss        (makes dist\NNEditor-Setup.exe)
; File types: the optional task runs "nneditor --register-file-types" (per-user ProgID and
; Open with entries, then Default apps); uninstalling runs --unregister-file-types.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif

[Setup]
AppId={{6C0A6E2B-5D7A-4C3B-9A51-2F7E0B3D9C11}
AppName=NNEditor
AppVersion={#AppVersion}
AppPublisher=NNEditor developers
DefaultDirName={localappdata}\Programs\NNEditor
DefaultGroupName=NNEditor
PrivilegesRequired=lowest
OutputDir=..\..\dist
OutputBaseFilename=NNEditor-Setup
Compression=lzma2
SolidCompression=yes
ArchitecturesInstallIn64BitMode=x64compatible
UninstallDisplayIcon={app}\nneditor.exe

[Files]
Source: "..\..\dist\bundle\nneditor\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion

[Icons]
Name: "{group}\NNEditor"; Filename: "{app}\nneditor.exe"
Name: "{userdesktop}\NNEditor"; Filename: "{app}\nneditor.exe"; Tasks: desktopicon

[Tasks]
Name: "desktopicon"; Description: "Create a desktop shortcut"; Flags: unchecked
Name: "filetypes"; Description: "Open model files (.onnx, .gguf, .safetensors, ...) with NNEditor"

[Run]
Filename: "{app}\nneditor.exe"; Parameters: "--register-file-types"; Tasks: filetypes; Flags: runhidden
Filename: "{app}\nneditor.exe"; Description: "Start NNEditor"; Flags: nowait postinstall skipifsilent

[UninstallRun]
Filename: "{app}\nneditor.exe"; Parameters: "--unregister-file-types"; Flags: runhidden; RunOnceId: "UnregisterFileTypes"
