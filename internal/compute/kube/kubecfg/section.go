package kubecfg

import "github.com/openclaw/occ/internal/config"

// DriverName selects this driver (drivers.compute.driver) and names its
// section, drivers.compute.<DriverName>; the registry's entry uses it.
const DriverName = "kubernetes"

// FromSection decodes the drivers.compute.kubernetes section of the config
// file strictly (an unknown key is an error naming it and its line),
// applies the defaults and validates the result; validation errors name
// the full key, one per line.
func FromSection(s *config.Section) (Config, error) {
	var c Config
	if err := s.Decode(&c); err != nil {
		return Config{}, err
	}
	c = c.WithDefaults()
	if err := s.Invalid(c.Validate()); err != nil {
		return Config{}, err
	}
	return c, nil
}
