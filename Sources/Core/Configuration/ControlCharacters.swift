extension String {
  /// Whether the text holds a control character (NUL, CR, LF, ESC...): such text never goes
  /// into a path, a request or onto a terminal as it is (SPEC section 10). A tab may be
  /// allowed, as in header values.
  public func containsControlCharacter(allowingTab: Bool = false) -> Bool {
    unicodeScalars.contains {
      $0.properties.generalCategory == .control && !(allowingTab && $0 == "\t")
    }
  }
}
